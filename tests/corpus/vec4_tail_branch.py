import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void mul_add_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                               float alpha, int n) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (idx + 3 < n) {
        float4 va = __ldg(reinterpret_cast<const float4*>(a + idx));
        float4 vb = __ldg(reinterpret_cast<const float4*>(b + idx));
        float4 vc;
        vc.x = alpha * va.x + vb.x; vc.y = alpha * va.y + vb.y;
        vc.z = alpha * va.z + vb.z; vc.w = alpha * va.w + vb.w;
        *reinterpret_cast<float4*>(c + idx) = vc;
    } else {
        for (int i = idx; i < n; ++i) c[i] = alpha * a[i] + b[i];
    }
}

torch::Tensor mul_add(torch::Tensor a, torch::Tensor b, double alpha) {
    auto c = torch::empty_like(a);
    int n = a.numel();
    int threads = 256, blocks = (n / 4 + threads) / threads;
    mul_add_kernel<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), (float)alpha, n);
    return c;
}
"""
ext = load_inline(name="mul_add4", cpp_sources="torch::Tensor mul_add(torch::Tensor a, torch::Tensor b, double alpha);",
                  cuda_sources=cuda_src, functions=["mul_add"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, alpha=0.5):
        super().__init__()
        self.alpha = alpha

    def forward(self, a, b):
        return ext.mul_add(a, b, self.alpha)
