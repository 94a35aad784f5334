"""kernel_fusion, before: one custom kernel per op (scale, shift, relu, square); each launch reads and
writes a full 256 MB intermediate, so the forward moves 8 x 256 MB and pays 4 launches."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void scale_k(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 1.7f;
}
__global__ void shift_k(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 0.3f;
}
__global__ void relu_k(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
__global__ void square_k(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v * v; }
}

torch::Tensor chain(torch::Tensor x) {
    long n = x.numel();
    auto t1 = torch::empty_like(x);
    auto t2 = torch::empty_like(x);
    if (n == 0) return t1;
    int threads = 256;
    unsigned blocks = (unsigned)((n + threads - 1) / threads);
    scale_k<<<blocks, threads>>>(x.data_ptr<float>(), t1.data_ptr<float>(), n);
    shift_k<<<blocks, threads>>>(t1.data_ptr<float>(), t2.data_ptr<float>(), n);
    relu_k<<<blocks, threads>>>(t2.data_ptr<float>(), t1.data_ptr<float>(), n);
    square_k<<<blocks, threads>>>(t1.data_ptr<float>(), t2.data_ptr<float>(), n);
    return t2;
}
"""

CPP_SRC = "torch::Tensor chain(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_kernel_fusion_before",
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
