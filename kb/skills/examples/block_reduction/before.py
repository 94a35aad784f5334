"""block_reduction, before: one warp per row (a pattern that suits short rows). With 2048 long rows
there are only 2048 warps, ~15 per SM, each walking 65536 elements, so too few loads are in flight
to cover DRAM latency."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void rowsum_warp(const float* __restrict__ x, float* __restrict__ y, long rows, long cols) {
    long r = blockIdx.x * (long)(blockDim.x / 32) + (threadIdx.x / 32);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float v = 0.0f;
    for (long c = lane; c < cols; c += 32) v += xr[c];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) y[r] = v;
}

torch::Tensor rowsum(torch::Tensor x) {
    long rows = x.size(0), cols = x.size(1);
    auto y = torch::empty({rows}, x.options());
    int threads = 128;                         // 4 rows per block
    long blocks = (rows + 3) / 4;
    if (rows > 0) rowsum_warp<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor rowsum(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_block_reduction_before",
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
