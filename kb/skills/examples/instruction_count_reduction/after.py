"""instruction_count_reduction, after: a 2-D grid over (plane, chunk) with 32-bit in-plane offsets.

blockIdx.y is the (n, c) plane, so the channel is one 32-bit modulo per block and scale/bias are loaded
once per thread; the inner loop is address increment, load, FMA, store. Loads stay scalar (as before) so
the gain measured is the instruction count alone.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define THREADS 256
#define PER_THREAD 4

__global__ void channel_affine_plane(const float* __restrict__ x, const float* __restrict__ scale,
                                     const float* __restrict__ bias, float* __restrict__ y,
                                     int C, int HW) {
    int plane = blockIdx.y;                 // n * C + c
    int c = plane % C;                      // one 32-bit modulo per block
    float s = scale[c], b = bias[c];
    const float* xp = x + (size_t)plane * HW;
    float* yp = y + (size_t)plane * HW;
    int base = blockIdx.x * (THREADS * PER_THREAD) + threadIdx.x;
#pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
        int i = base + j * THREADS;
        if (i < HW) yp[i] = fmaf(xp[i], s, b);
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor scale, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 4, "x: 4-D float32 CUDA");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    int C = x.size(1);
    long long planes = x.size(0) * (long long)C, hw = x.size(2) * (long long)x.size(3);
    TORCH_CHECK(planes < 65536 && hw < (1LL << 31), "plane count must fit gridDim.y");
    dim3 grid((unsigned)((hw + THREADS * PER_THREAD - 1) / (THREADS * PER_THREAD)), (unsigned)planes);
    channel_affine_plane<<<grid, THREADS>>>(x.data_ptr<float>(), scale.contiguous().data_ptr<float>(),
        bias.contiguous().data_ptr<float>(), y.data_ptr<float>(), C, (int)hw);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor scale, torch::Tensor bias);"

_ext = load_inline(
    name="kb_instruction_count_reduction_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.scale, self.bias)
