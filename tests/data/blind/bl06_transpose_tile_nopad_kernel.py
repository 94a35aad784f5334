"""Blind-set kernel bl06_transpose_tile_nopad: a first CUDA version of the task (batched matrix transpose through a 32x32 shared tile without padding)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

#define TILE 32
__global__ void transpose_tile_kernel(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE];
    const float* src = in + (long)blockIdx.z * rows * cols;
    float* dst = out + (long)blockIdx.z * rows * cols;
    int x = blockIdx.x * TILE + threadIdx.x;
    int y0 = blockIdx.y * TILE;
    for (int j = threadIdx.y; j < TILE; j += blockDim.y) {
        int y = y0 + j;
        if (x < cols && y < rows) tile[j][threadIdx.x] = src[(long)y * cols + x];
    }
    __syncthreads();
    int ox = blockIdx.y * TILE + threadIdx.x;
    int oy0 = blockIdx.x * TILE;
    for (int j = threadIdx.y; j < TILE; j += blockDim.y) {
        int oy = oy0 + j;
        if (ox < rows && oy < cols) dst[(long)oy * rows + ox] = tile[threadIdx.x][j];
    }
}

torch::Tensor batched_transpose(torch::Tensor x) {
    int b = x.size(0), rows = x.size(1), cols = x.size(2);
    auto out = torch::empty({b, cols, rows}, x.options());
    dim3 block(TILE, 8);
    dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE, b);
    transpose_tile_kernel<<<grid, block>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

CPP_SRC = """
torch::Tensor batched_transpose(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl06_transpose_tile_nopad",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['batched_transpose'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.batched_transpose(x.contiguous())
