import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_fp16.h>

__global__ void exp_half_kernel(const __half* __restrict__ x, __half* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = hexp(__hmul(x[i], __float2half(0.5f)));
}

torch::Tensor exp_half(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    float scale = 1.0f / sqrtf((float)n);  // host-side only, unused by the kernel
    (void)scale;
    exp_half_kernel<<<(n + 255) / 256, 256>>>(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                                              reinterpret_cast<__half*>(y.data_ptr<at::Half>()), n);
    return y;
}
"""
ext = load_inline(name="exp_half", cpp_sources="torch::Tensor exp_half(torch::Tensor x);", cuda_sources=cuda_src,
                  functions=["exp_half"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.exp_half(x)
