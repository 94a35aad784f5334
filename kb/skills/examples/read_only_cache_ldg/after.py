"""read_only_cache_ldg, after: const __restrict__ pointers, __ldg loads, and loads made unconditional.

The guarded loads of the before (``if (j >= 0 && j < n)``) cannot be merged: each is its own branch. Here
every load reads a clamped index and the weight of an out-of-range tap is zero, so the 4 outputs of a
thread read the same 18 addresses and the compiler keeps that window in registers (18 read-only loads
instead of 60). The taps are read once per thread. The summation order per output is unchanged.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define TAPS 15
#define HALF 7
#define OUT_PER_THREAD 4

__global__ void fir_readonly(const float* __restrict__ x, const float* __restrict__ w,
                             float* __restrict__ y, long n) {
    long base = ((long)blockIdx.x * blockDim.x + threadIdx.x) * OUT_PER_THREAD;
    if (base >= n) return;
    float taps[TAPS];
#pragma unroll
    for (int k = 0; k < TAPS; ++k) taps[k] = __ldg(w + k);
#pragma unroll
    for (int o = 0; o < OUT_PER_THREAD; ++o) {
        long i = base + o;
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < TAPS; ++k) {
            long j = i + k - HALF;
            long jc = j < 0 ? 0 : (j >= n ? n - 1 : j);      // always a valid address
            float wk = (j >= 0 && j < n) ? taps[k] : 0.f;    // zero padding through the weight
            acc += wk * __ldg(x + jc);
        }
        if (i < n) y[i] = acc;
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && w.numel() == TAPS, "x: float32 CUDA, 15 taps");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    long threads = (n + OUT_PER_THREAD - 1) / OUT_PER_THREAD;
    if (n) fir_readonly<<<(unsigned)((threads + 255) / 256), 256>>>(x.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                                               y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w);"

_ext = load_inline(
    name="kb_read_only_cache_ldg_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

TAPS = 15


class ModelNew(nn.Module):
    def __init__(self, taps: int = TAPS):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(taps) / taps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.weight)
