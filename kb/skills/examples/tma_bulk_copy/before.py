"""tma_bulk_copy, before: a block per row reads the row from global memory twice (once for the sum,
once to write x - mean), with every thread issuing its own loads; each block stalls on the row's
first loads before any work starts."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__device__ float block_sum(float v, float* sm) {          // blockDim.x multiple of 32; result in every thread
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sm[warp] = v;
    __syncthreads();
    v = threadIdx.x < (blockDim.x >> 5) ? sm[threadIdx.x] : 0.0f;
    if (warp == 0) {
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) sm[0] = v;
    }
    __syncthreads();
    return sm[0];
}

__global__ void center_rows(const float* __restrict__ x, float* __restrict__ y, long cols) {
    __shared__ float sm[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float s = 0.0f;
    for (long c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    float mean = block_sum(s, sm) / (float)cols;
    for (long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] - mean;   // second global read
}

torch::Tensor center(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long rows = x.size(0), cols = x.size(1);
    if (rows > 0) center_rows<<<(unsigned)rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor center(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_tma_bulk_copy_before",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['center'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().center(x.contiguous())
