"""read_only_cache_ldg, after: the same loop with const __restrict__ pointers and __ldg loads.

With aliasing ruled out, the compiler may keep the taps in registers and reuse each input sample across
the thread's 4 outputs (a 4 + 14 sample window instead of 60 reloads), and __ldg sends the loads through
the non-coherent read-only path (LDG.E.CONSTANT). The source loop and the arithmetic order are unchanged.
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
#pragma unroll
    for (int o = 0; o < OUT_PER_THREAD; ++o) {
        long i = base + o;
        if (i < n) {
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < TAPS; ++k) {
                long j = i + k - HALF;
                if (j >= 0 && j < n) acc += __ldg(w + k) * __ldg(x + j);
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
