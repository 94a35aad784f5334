"""block_reduction, after: a 512-thread block per row: 16 warps stream the row with 4 independent
accumulators each, then a two-level block reduction (warp shuffles, one shared slot per warp, one
barrier, a final warp shuffle). 16x more warps per row keep DRAM busy."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float block_sum(float v) {          // blockDim.x: multiple of 32, <= 1024
    __shared__ float part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    v = (threadIdx.x < nw) ? part[threadIdx.x] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    return v;                                  // valid in thread 0
}

__global__ void rowsum_block(const float* __restrict__ x, float* __restrict__ y, long rows, long cols) {
    long r = blockIdx.x;
    const float* xr = x + r * cols;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    long step = blockDim.x;
    long c = threadIdx.x;
    for (; c + 3 * step < cols; c += 4 * step) {
        a0 += xr[c]; a1 += xr[c + step]; a2 += xr[c + 2 * step]; a3 += xr[c + 3 * step];
    }
    for (; c < cols; c += step) a0 += xr[c];
    float v = block_sum((a0 + a1) + (a2 + a3));
    if (threadIdx.x == 0) y[r] = v;
}

torch::Tensor rowsum(torch::Tensor x) {
    long rows = x.size(0), cols = x.size(1);
    auto y = torch::empty({rows}, x.options());
    if (rows > 0) rowsum_block<<<(unsigned)rows, 512>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor rowsum(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_block_reduction_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['rowsum'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().rowsum(x.contiguous())
