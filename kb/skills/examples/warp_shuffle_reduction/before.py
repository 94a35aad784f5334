"""warp_shuffle_reduction, before: a block of 256 threads per row and a shared-memory tree: 8 levels,
each a shared store/load plus a __syncthreads, with half the threads idle at every level and the
last 5 levels run by a single warp."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void rowsum_tree(const float* __restrict__ x, float* __restrict__ y, long rows, long cols) {
    __shared__ float sm[256];
    long r = blockIdx.x;
    const float* xr = x + r * cols;
    float v = 0.0f;
    for (long c = threadIdx.x; c < cols; c += blockDim.x) v += xr[c];
    sm[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sm[threadIdx.x] += sm[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[r] = sm[0];
}

torch::Tensor rowsum(torch::Tensor x) {
    long rows = x.size(0), cols = x.size(1);
    auto y = torch::empty({rows}, x.options());
    if (rows > 0) rowsum_tree<<<(unsigned)rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor rowsum(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_warp_shuffle_reduction_before",
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
