"""Held-out: sum of all 16M elements of an fp32 tensor, every thread atomicAdd-ing its element into
one global accumulator."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void sum_atomic_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(out, x[i]);
    }
}

torch::Tensor sum_cuda(torch::Tensor x) {
    auto out = torch::zeros({1}, x.options());
    int n = x.numel();
    sum_atomic_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor sum_cuda(torch::Tensor x);"

ext = load_inline(name="heldout_reduce_sum_atomic", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["sum_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_cuda(x.contiguous())
