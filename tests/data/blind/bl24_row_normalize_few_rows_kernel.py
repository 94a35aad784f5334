"""Blind-set kernel bl24_row_normalize_few_rows: a first CUDA version of the task (L2-normalise each row of a short, very wide batch; one block per row)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void row_l2norm_kernel(const float* x, float* y, int cols) {
    __shared__ float part[32];
    const float* row = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    float ss = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) ss += row[c] * row[c];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_down_sync(0xffffffff, ss, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
        if (threadIdx.x == 0) part[0] = v;
    }
    __syncthreads();
    float inv = 1.f / sqrtf(part[0]);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = row[c] * inv;
}

torch::Tensor row_l2norm(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    row_l2norm_kernel<<<rows, 1024>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

CPP_SRC = """
torch::Tensor row_l2norm(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl24_row_normalize_few_rows",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['row_l2norm'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.row_l2norm(x.contiguous())
