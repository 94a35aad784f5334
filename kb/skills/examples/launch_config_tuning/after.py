"""launch_config_tuning, after: the same kernel body launched with 256-thread blocks (a multiple of 32,
8 blocks fill all 64 warp slots of an SM), so occupancy is limited by nothing and 8x fewer blocks
are scheduled."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void tanhx_k(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = tanhf(v) * v; }
}

torch::Tensor tanhx(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    int threads = 256;                         // 8 warps per block, 8 blocks per SM = 64 warps
    long blocks = (n + threads - 1) / threads;
    if (n > 0) tanhx_k<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor tanhx(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_launch_config_tuning_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['tanhx'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().tanhx(x.contiguous())
