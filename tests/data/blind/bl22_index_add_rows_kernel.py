"""Blind-set kernel bl22_index_add_rows: a first CUDA version of the task (segment sum: out[idx[i], :] += src[i, :] into a small output (index_add), global float atomics)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void index_add_kernel(const float* src, const int64_t* idx, float* out, int n, int dim) {
    long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long)n * dim) return;
    long i = t / dim;
    int d = t % dim;
    atomicAdd(&out[idx[i] * dim + d], src[t]);
}

torch::Tensor index_add_rows(torch::Tensor src, torch::Tensor idx, int64_t out_rows) {
    int n = src.size(0), dim = src.size(1);
    auto out = torch::zeros({out_rows, dim}, src.options());
    long total = (long)n * dim;
    index_add_kernel<<<(total + 255) / 256, 256>>>(src.data_ptr<float>(), idx.data_ptr<int64_t>(), out.data_ptr<float>(), n, dim);
    return out;
}
"""

CPP_SRC = """
torch::Tensor index_add_rows(torch::Tensor src, torch::Tensor idx, int64_t out_rows);
"""

_ext = load_inline(
    name="blind_bl22_index_add_rows",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['index_add_rows'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, out_rows: int):
        super().__init__()
        self.out_rows = out_rows

    def forward(self, src, idx):
        return _ext.index_add_rows(src.contiguous(), idx.contiguous(), self.out_rows)
