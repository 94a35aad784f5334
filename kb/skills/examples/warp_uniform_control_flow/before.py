"""warp_uniform_control_flow, before: one thread per element, switch on column % 4.

Neighbouring lanes take different cases, so every warp executes all four activation bodies with a
quarter of its lanes active in each (branch_divergence high, pred_on_threads_per_inst about 8).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#include <math.h>

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }
__device__ __forceinline__ float silu(float v) { return v / (1.f + expf(-v)); }
__device__ __forceinline__ float softplus(float v) { return v > 20.f ? v : log1pf(expf(v)); }
__device__ __forceinline__ float mish(float v) { return v * tanhf(softplus(v)); }

__global__ void typed_act(const float* __restrict__ x, float* __restrict__ y, long n, int cols) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], r;
    switch ((int)(i & 3)) {  // == column % 4 (row length is a multiple of 4)
        case 0: r = gelu_erf(v); break;
        case 1: r = silu(v); break;
        case 2: r = mish(v); break;
        default: r = softplus(v); break;
    }
    y[i] = r;
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 2, "x: 2-D float32 CUDA");
    TORCH_CHECK(x.size(1) % 4 == 0, "row length must be a multiple of 4");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    typed_act<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (int)x.size(1));
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x);"

_ext = load_inline(
    name="kb_warp_uniform_control_flow_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x)
