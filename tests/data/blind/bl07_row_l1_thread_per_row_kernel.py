"""Blind-set kernel bl07_row_l1_thread_per_row: a first CUDA version of the task (mean absolute value of each row; one thread walks a whole row)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void row_abs_mean_kernel(const float* x, float* out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* p = x + (long)r * cols;
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += fabsf(p[c]);
    out[r] = s / cols;
}

torch::Tensor row_abs_mean(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({rows}, x.options());
    row_abs_mean_kernel<<<(rows + 127) / 128, 128>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

CPP_SRC = """
torch::Tensor row_abs_mean(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl07_row_l1_thread_per_row",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['row_abs_mean'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.row_abs_mean(x.contiguous())
