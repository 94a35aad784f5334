"""Held-out: fused bias add + exact (erf) GELU on a 16384 x 4096 fp32 activation, bias broadcast over
rows, one scalar element per thread."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void bias_gelu_kernel(const float* x, const float* bias, float* y, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        float v = x[idx] + bias[idx % cols];
        y[idx] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
    }
}

torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    int total = rows * cols;
    bias_gelu_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), bias.data_ptr<float>(),
                                                   y.data_ptr<float>(), rows, cols);
    return y;
}
"""

cpp_source = "torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias);"

ext = load_inline(name="heldout_bias_gelu", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["bias_gelu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.bias_gelu(x.contiguous(), self.bias)
