"""persistent_kernel, after: as many blocks as fit on the GPU at once, each looping over row tiles.

The grid is sized from the SM count and the occupancy calculator; each block stages the weight once and
then walks tiles blockIdx.x, blockIdx.x + gridDim.x, ... The per-row arithmetic is unchanged.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define D 32
#define ROWS_PER_TILE 8
#define THREADS 256

__global__ void __launch_bounds__(THREADS)
small_linear_persistent(const float* __restrict__ x, const float* __restrict__ w,
                        const float* __restrict__ b, float* __restrict__ y, long rows) {
    __shared__ float ws[D][D];
    __shared__ float bs[D];
    for (int i = threadIdx.x; i < D * D; i += blockDim.x) ws[i / D][i % D] = w[i];
    if (threadIdx.x < D) bs[threadIdx.x] = b[threadIdx.x];
    __syncthreads();
    int col = threadIdx.x & 31;
    float bias = bs[col];
    long tiles = (rows + ROWS_PER_TILE - 1) / ROWS_PER_TILE;
    for (long t = blockIdx.x; t < tiles; t += gridDim.x) {
        long r = t * ROWS_PER_TILE + (threadIdx.x >> 5);
        if (r >= rows) continue;               // warp-uniform: the whole warp owns row r
        float xv = x[r * D + col];
        float acc = bias;
#pragma unroll
        for (int k = 0; k < D; ++k) acc = fmaf(__shfl_sync(0xffffffffu, xv, k), ws[k][col], acc);
        y[r * D + col] = acc;
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.size(1) == D, "x: rows x 32 float32 CUDA");
    x = x.contiguous();
    long rows = x.size(0);
    auto y = torch::empty_like(x);
    static int grid = 0;                       // device properties are queried once, not per call
    if (grid == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, small_linear_persistent, THREADS, 0);
        grid = sms * (per_sm > 0 ? per_sm : 1);
    }
    long tiles = (rows + ROWS_PER_TILE - 1) / ROWS_PER_TILE;
    unsigned blocks = (unsigned)(tiles < grid ? tiles : grid);
    if (blocks) small_linear_persistent<<<blocks, THREADS>>>(x.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                                           b.contiguous().data_ptr<float>(), y.data_ptr<float>(), rows);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="kb_persistent_kernel_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

D = 32


class ModelNew(nn.Module):
    def __init__(self, d: int = D):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.weight, self.bias)
