"""more_work_per_thread, after: each thread owns 8 elements spaced blockDim apart (so every warp access
stays coalesced), issues all 24 loads before the first use (ILP), and only the last partial chunk
pays per-element bounds checks."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#define ELEMS 8

__global__ void fma3_ilp(const float* __restrict__ a, const float* __restrict__ b,
                         const float* __restrict__ c, float* __restrict__ y, long n) {
    const long chunk = (long)blockDim.x * ELEMS;
    for (long base = blockIdx.x * chunk; base < n; base += (long)gridDim.x * chunk) {
        long i0 = base + threadIdx.x;
        if (base + chunk <= n) {               // full chunk: no per-element checks
            float va[ELEMS], vb[ELEMS], vc[ELEMS];
#pragma unroll
            for (int j = 0; j < ELEMS; ++j) {  // 24 independent loads in flight
                va[j] = __ldg(a + i0 + (long)j * blockDim.x);
                vb[j] = __ldg(b + i0 + (long)j * blockDim.x);
                vc[j] = __ldg(c + i0 + (long)j * blockDim.x);
            }
#pragma unroll
            for (int j = 0; j < ELEMS; ++j) y[i0 + (long)j * blockDim.x] = va[j] * vb[j] + vc[j];
        } else {                               // tail chunk
            for (int j = 0; j < ELEMS; ++j) {
                long i = i0 + (long)j * blockDim.x;
                if (i < n) y[i] = a[i] * b[i] + c[i];
            }
        }
    }
}

torch::Tensor fma3(torch::Tensor a, torch::Tensor b, torch::Tensor c) {
    auto y = torch::empty_like(a);
    long n = a.numel();
    int threads = 256;
    long chunk = (long)threads * ELEMS;
    long blocks = (n + chunk - 1) / chunk;
    if (blocks > 1048576) blocks = 1048576;
    if (n > 0)
        fma3_ilp<<<(unsigned)blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                c.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor fma3(torch::Tensor a, torch::Tensor b, torch::Tensor c);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_more_work_per_thread_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['fma3'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return _ext().fma3(a.contiguous(), b.contiguous(), c.contiguous())
