"""kernel_fusion, after: the four ops in one kernel; the intermediates live in a register, so the
forward reads x once and writes y once (2 x 256 MB instead of 8 x 256 MB) with one launch. The
operation order (x*1.7, then +0.3) is kept so rounding matches the reference."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void chain_fused(const float* __restrict__ x, float* __restrict__ y, long n) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride) {
        float t = __fmul_rn(x[i], 1.7f);       // keep two roundings like the eager chain (no FMA contraction)
        t = __fadd_rn(t, 0.3f);
        t = fmaxf(t, 0.0f);
        y[i] = t * t;
    }
}

torch::Tensor chain(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n == 0) return y;
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    if (blocks > 1048576) blocks = 1048576;
    chain_fused<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor chain(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_kernel_fusion_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['chain'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().chain(x.contiguous())
