"""kernel_fission, before: one fused kernel, one thread per column: it sums the column and then
rescales it. The reduction phase dictates the launch (8192 threads, 32 blocks on 132 SMs), and the
embarrassingly parallel rescale phase inherits that tiny grid."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void colnorm_fused(const float* __restrict__ x, float* __restrict__ y, long rows, long cols) {
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (long r = 0; r < rows; ++r) s += x[r * cols + c];
    for (long r = 0; r < rows; ++r) y[r * cols + c] = x[r * cols + c] / s;
}

torch::Tensor colnorm(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long rows = x.size(0), cols = x.size(1);
    int threads = 256;
    long blocks = (cols + threads - 1) / threads;
    if (cols > 0) colnorm_fused<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor colnorm(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_kernel_fission_before",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['colnorm'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().colnorm(x.contiguous())
