"""launch_config_tuning, before: blocks of 32 threads. An SM holds at most 32 resident blocks, so only
32 of its 64 warp slots can ever be filled (50 % theoretical occupancy) and 4 M tiny blocks must be
scheduled."""

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
    int threads = 32;                          // one warp per block
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
            name="ks_launch_config_tuning_before",
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
