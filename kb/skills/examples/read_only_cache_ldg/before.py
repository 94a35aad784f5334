"""read_only_cache_ldg, before: plain pointers, so the compiler must assume y may alias x and w.

Each thread computes 4 consecutive outputs. After every store to y the compiler has to reload the
taps and the overlapping input window (the store might have changed them): 15 loads of x and 15 of w
per output, 120 load instructions per thread instead of ~33.
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

__global__ void fir_alias(const float* x, const float* w, float* y, long n) {
    long base = ((long)blockIdx.x * blockDim.x + threadIdx.x) * OUT_PER_THREAD;
#pragma unroll
    for (int o = 0; o < OUT_PER_THREAD; ++o) {
        long i = base + o;
        if (i < n) {
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < TAPS; ++k) {
                long j = i + k - HALF;
                if (j >= 0 && j < n) acc += w[k] * x[j];
            }
            y[i] = acc;
        }
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && w.numel() == TAPS, "x: float32 CUDA, 15 taps");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    long threads = (n + OUT_PER_THREAD - 1) / OUT_PER_THREAD;
    if (n) fir_alias<<<(unsigned)((threads + 255) / 256), 256>>>(x.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                                               y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w);"

_ext = load_inline(
    name="kb_read_only_cache_ldg_before",
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
