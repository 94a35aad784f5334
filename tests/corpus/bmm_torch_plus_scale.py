import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void scale_residual_kernel(const float* __restrict__ a, const float* __restrict__ r, float* __restrict__ out,
                                      float s, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * s + r[i];
}

torch::Tensor scale_residual(torch::Tensor a, torch::Tensor r, double s) {
    auto out = torch::empty_like(a);
    long n = a.numel();
    scale_residual_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), r.data_ptr<float>(), out.data_ptr<float>(), (float)s, n);
    return out;
}
"""
ext = load_inline(name="scale_res", cpp_sources="torch::Tensor scale_residual(torch::Tensor a, torch::Tensor r, double s);",
                  cuda_sources=src, functions=["scale_residual"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, A, B, R):
        prod = torch.bmm(A, B)
        return ext.scale_residual(prod, R, 0.5)
