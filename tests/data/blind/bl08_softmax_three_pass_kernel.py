"""Blind-set kernel bl08_softmax_three_pass: a first CUDA version of the task (row softmax, one block per row, max / sum / write in three passes over global memory)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void softmax_rows_kernel(const float* x, float* y, int cols) {
    extern __shared__ float red[];
    const float* row = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    int t = threadIdx.x;
    float m = -INFINITY;
    for (int c = t; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    red[t] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = fmaxf(red[t], red[t + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int c = t; c < cols; c += blockDim.x) sum += expf(row[c] - m);
    red[t] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        __syncthreads();
    }
    sum = red[0];
    for (int c = t; c < cols; c += blockDim.x) out[c] = expf(row[c] - m) / sum;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    int threads = 256;
    softmax_rows_kernel<<<rows, threads, threads * sizeof(float)>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

CPP_SRC = """
torch::Tensor softmax_rows(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl08_softmax_three_pass",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['softmax_rows'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.softmax_rows(x.contiguous())
