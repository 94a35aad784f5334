"""vectorized_access_16b, after: float4 (16-byte) loads and stores, a 4x shorter grid-stride loop, a
scalar tail for n % 4 and a scalar fallback when either pointer is not 16-byte aligned."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cstdint>

__device__ __forceinline__ float ssr1(float v) { return fmaxf(v * 3.0f + 1.0f, 0.0f); }

__global__ void ssr_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];                       // one LDG.128 per thread
        v.x = ssr1(v.x); v.y = ssr1(v.y); v.z = ssr1(v.z); v.w = ssr1(v.w);
        y[i] = v;                              // one STG.128 per thread
    }
}

__global__ void ssr_scalar(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride) y[i] = ssr1(x[i]);
}

torch::Tensor ssr(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    int threads = 256;
    bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
    long start = 0;
    if (aligned) {
        long n4 = n / 4;
        long blocks = (n4 + threads - 1) / threads;
        if (blocks > 1048576) blocks = 1048576;
        if (n4 > 0)
            ssr_vec4<<<(unsigned)blocks, threads>>>(reinterpret_cast<const float4*>(xp),
                                                    reinterpret_cast<float4*>(yp), n4);
        start = n4 * 4;
    }
    long rest = n - start;
    if (rest > 0) {
        long blocks = (rest + threads - 1) / threads;
        if (blocks > 1048576) blocks = 1048576;
        ssr_scalar<<<(unsigned)blocks, threads>>>(xp, yp, start, n);
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor ssr(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_vectorized_access_16b_after",
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
