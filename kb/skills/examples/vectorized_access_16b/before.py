"""vectorized_access_16b, before: one 4-byte load and one 4-byte store per thread; every warp issues
twice as many memory instructions per byte as needed and the LSU/L1 path, not DRAM, sets the pace."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void ssr_scalar(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i] * 3.0f + 1.0f, 0.0f);
}

torch::Tensor ssr(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    if (n > 0) ssr_scalar<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor ssr(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_vectorized_access_16b_before",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['ssr'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().ssr(x.contiguous())
