"""warp_shuffle_reduction, after: each warp reduces its 32 partials in registers with 5 __shfl_xor_sync
steps (no shared memory, no barrier), one shared slot per warp, one __syncthreads, and warp 0
reduces the 8 warp sums with shuffles again."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void rowsum_shfl(const float* __restrict__ x, float* __restrict__ y, long rows, long cols) {
    __shared__ float warp_part[32];
    long r = blockIdx.x;
    const float* xr = x + r * cols;
    float v = 0.0f;
    for (long c = threadIdx.x; c < cols; c += blockDim.x) v += xr[c];
    v = warp_sum(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        v = lane < nw ? warp_part[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) y[r] = v;
    }
}

torch::Tensor rowsum(torch::Tensor x) {
    long rows = x.size(0), cols = x.size(1);
    auto y = torch::empty({rows}, x.options());
    if (rows > 0) rowsum_shfl<<<(unsigned)rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor rowsum(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_warp_shuffle_reduction_after",
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
