"""Held-out: row softmax of a 4096 x 4096 fp32 matrix with one thread per row and three sequential
passes (max, sum of exp, normalise): the naive 3-pass version an LLM writes first."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void softmax_kernel(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float mx = -INFINITY;
    for (int j = 0; j < cols; j++) mx = fmaxf(mx, xr[j]);
    float sum = 0.0f;
    for (int j = 0; j < cols; j++) sum += expf(xr[j] - mx);
    for (int j = 0; j < cols; j++) yr[j] = expf(xr[j] - mx) / sum;
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    softmax_kernel<<<(rows + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

cpp_source = "torch::Tensor softmax_cuda(torch::Tensor x);"

ext = load_inline(name="heldout_softmax_rowthread", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["softmax_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_cuda(x.contiguous())
