"""A row sum with the textbook first-attempt reduction: interleaved addressing with a modulo test,
so most lanes of a warp sit idle at every step of the shared-memory tree (divergent branches)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define THREADS 512

__global__ void row_sum_divergent_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float partial[THREADS];
    const float* row = x + (long)blockIdx.x * cols;
    int tid = threadIdx.x;

    float acc = 0.0f;
    for (int j = tid; j < cols; j += THREADS) acc += row[j];
    partial[tid] = acc;
    __syncthreads();

    for (int s = 1; s < THREADS; s *= 2) {
        if (tid % (2 * s) == 0) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    if (tid == 0) y[blockIdx.x] = partial[0];
}

torch::Tensor row_sum(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty({rows}, x.options());
    row_sum_divergent_kernel<<<rows, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

cpp_source = "torch::Tensor row_sum(torch::Tensor x);"

row_sum_ext = load_inline(
    name="ks_example_row_sum_divergent",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_sum"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_sum_ext.row_sum(x.contiguous())
