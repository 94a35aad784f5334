"""Blind-set kernel bl03_row_sum_atomics: a first CUDA version of the task (sum over the last dim; every element atomically added into its row's total)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void row_sum_atomic_kernel(const float* x, float* out, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        int r = idx / cols;
        atomicAdd(&out[r], x[idx]);
    }
}

torch::Tensor row_sum(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto out = torch::zeros({rows}, x.options());
    int n = rows * cols;
    row_sum_atomic_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

CPP_SRC = """
torch::Tensor row_sum(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl03_row_sum_atomics",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['row_sum'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.row_sum(x.contiguous())
