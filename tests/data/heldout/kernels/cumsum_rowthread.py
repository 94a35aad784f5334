"""Held-out: inclusive cumsum along dim 1 of a 128 x 4000 fp32 tensor (KernelBench L1 "cumsum"), one
thread per row scanning sequentially."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void cumsum_kernel(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float acc = 0.0f;
        for (int j = 0; j < cols; ++j) {
            acc += x[row * cols + j];
            y[row * cols + j] = acc;
        }
    }
}

torch::Tensor cumsum_cuda(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    int threads = 256;
    cumsum_kernel<<<(rows + threads - 1) / threads, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

cpp_source = "torch::Tensor cumsum_cuda(torch::Tensor x);"

ext = load_inline(name="heldout_cumsum_rowthread", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["cumsum_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.cumsum_cuda(x.contiguous())
