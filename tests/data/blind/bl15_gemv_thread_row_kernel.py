"""Blind-set kernel bl15_gemv_thread_row: a first CUDA version of the task (y = A @ v (matrix-vector); one thread per output row)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void gemv_row_kernel(const float* A, const float* v, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float acc = 0.f;
        for (int c = 0; c < cols; ++c) acc += A[(long)r * cols + c] * v[c];
        y[r] = acc;
    }
}

torch::Tensor gemv(torch::Tensor a, torch::Tensor v) {
    int rows = a.size(0), cols = a.size(1);
    auto y = torch::empty({rows}, a.options());
    gemv_row_kernel<<<(rows + 255) / 256, 256>>>(a.data_ptr<float>(), v.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = """
torch::Tensor gemv(torch::Tensor a, torch::Tensor v);
"""

_ext = load_inline(
    name="blind_bl15_gemv_thread_row",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['gemv'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, a, v):
        return _ext.gemv(a.contiguous(), v.contiguous())
