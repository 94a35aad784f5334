"""Blind-set kernel bl20_cumsum_thread_row: a first CUDA version of the task (inclusive prefix sum along each row; one thread scans a whole row sequentially)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void cumsum_row_kernel(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float run = 0.f;
    for (int c = 0; c < cols; ++c) {
        run += x[(long)r * cols + c];
        y[(long)r * cols + c] = run;
    }
}

torch::Tensor cumsum_rows(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    cumsum_row_kernel<<<(rows + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = """
torch::Tensor cumsum_rows(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl20_cumsum_thread_row",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['cumsum_rows'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.cumsum_rows(x.contiguous())
