"""Held-out: argmax over the last dimension of a 4096 x 8192 fp32 matrix, one block per row, a
shared-memory tree over (value, index) pairs."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#define THREADS 256

__global__ void argmax_kernel(const float* x, long* out, int cols) {
    __shared__ float sval[THREADS];
    __shared__ int sidx[THREADS];
    const float* xr = x + (long)blockIdx.x * cols;
    int tid = threadIdx.x;
    float best = -INFINITY;
    int bi = 0;
    for (int j = tid; j < cols; j += THREADS) {
        float v = xr[j];
        if (v > best) { best = v; bi = j; }
    }
    sval[tid] = best;
    sidx[tid] = bi;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) {
            float o = sval[tid + s];
            int oi = sidx[tid + s];
            if (o > sval[tid] || (o == sval[tid] && oi < sidx[tid])) { sval[tid] = o; sidx[tid] = oi; }
        }
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sidx[0];
}

torch::Tensor argmax_cuda(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({rows}, x.options().dtype(torch::kLong));
    argmax_kernel<<<rows, THREADS>>>(x.data_ptr<float>(), out.data_ptr<long>(), cols);
    return out;
}
"""

cpp_source = "torch::Tensor argmax_cuda(torch::Tensor x);"

ext = load_inline(name="heldout_argmax_rows", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["argmax_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.argmax_cuda(x.contiguous())
