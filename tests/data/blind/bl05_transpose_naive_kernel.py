"""Blind-set kernel bl05_transpose_naive: a first CUDA version of the task (out = x.t() materialised; one thread per element, reads along rows, writes down columns)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void transpose_naive_kernel(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[(long)c * rows + r] = in[(long)r * cols + c];
    }
}

torch::Tensor transpose2d(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({cols, rows}, x.options());
    dim3 block(32, 8);
    dim3 grid((cols + 31) / 32, (rows + 7) / 8);
    transpose_naive_kernel<<<grid, block>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

CPP_SRC = """
torch::Tensor transpose2d(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl05_transpose_naive",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['transpose2d'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.transpose2d(x.contiguous())
