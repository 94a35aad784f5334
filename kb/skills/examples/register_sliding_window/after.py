"""register_sliding_window, after: each thread walks 64 rows down one column with a 9-value window.

The window lives in registers: per output the thread loads one new row value, shifts the window
(register renaming after full unrolling, no data movement) and does nine FMAs. Loads per output drop
from 9 to (64 + 8) / 64, so each input value crosses L1 about once.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define TAPS 9
#define HALF 4
#define STRIP 64   // output rows per thread

__global__ void vfilter_window(const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, int H, int W) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i0 = blockIdx.y * STRIP;
    if (j >= W) return;
    float wr[TAPS];
#pragma unroll
    for (int k = 0; k < TAPS; ++k) wr[k] = w[k];
    float win[TAPS];
#pragma unroll
    for (int k = 0; k < TAPS - 1; ++k) {            // rows i0 - 4 .. i0 + 3
        int r = i0 + k - HALF;
        win[k] = (r >= 0 && r < H) ? x[(size_t)r * W + j] : 0.f;
    }
#pragma unroll
    for (int o = 0; o < STRIP; ++o) {
        int i = i0 + o;
        int r = i + HALF;                           // the one new row this output needs
        win[TAPS - 1] = (r < H) ? x[(size_t)r * W + j] : 0.f;
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < TAPS; ++k) acc += wr[k] * win[k];
        if (i < H) y[(size_t)i * W + j] = acc;
#pragma unroll
        for (int k = 0; k < TAPS - 1; ++k) win[k] = win[k + 1];
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 2 && w.numel() == TAPS, "2-D float32, 9 taps");
    x = x.contiguous();
    int H = x.size(0), W = x.size(1);
    auto y = torch::empty_like(x);
    vfilter_window<<<dim3((W + 127) / 128, (H + STRIP - 1) / STRIP), 128>>>(x.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                                                           y.data_ptr<float>(), H, W);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w);"

_ext = load_inline(
    name="kb_register_sliding_window_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

TAPS = 9


class ModelNew(nn.Module):
    def __init__(self, taps: int = TAPS):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(taps) / taps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.weight)
