import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void masked_fill_kernel(const float* __restrict__ x, const bool* __restrict__ mask, float* __restrict__ y,
                                   float value, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = mask[i] ? value : x[i];
    }
}

torch::Tensor masked_fill(torch::Tensor x, torch::Tensor mask, double value) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    masked_fill_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), mask.data_ptr<bool>(), y.data_ptr<float>(),
                                                 (float)value, n);
    return y;
}
"""
ext = load_inline(name="masked_fill", cpp_sources="torch::Tensor masked_fill(torch::Tensor x, torch::Tensor mask, double value);",
                  cuda_sources=src, functions=["masked_fill"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x, mask):
        return ext.masked_fill(x, mask, -1e9)
