"""Blind-set kernel bl11_sum_interleaved_tree: a first CUDA version of the task (sum of a large vector: shared-memory tree with interleaved addressing (tid % (2s)), one atomic per block)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void sum_interleaved_kernel(const float* x, float* out, int n) {
    __shared__ float sdata[512];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[t] = (i < n) ? x[i] : 0.f;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        if (t % (2 * s) == 0) sdata[t] += sdata[t + s];
        __syncthreads();
    }
    if (t == 0) atomicAdd(out, sdata[0]);
}

torch::Tensor total_sum(torch::Tensor x) {
    int n = x.numel();
    auto out = torch::zeros({1}, x.options());
    sum_interleaved_kernel<<<(n + 511) / 512, 512>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

CPP_SRC = """
torch::Tensor total_sum(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl11_sum_interleaved_tree",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['total_sum'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.total_sum(x.contiguous())
