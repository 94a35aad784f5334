"""warp_uniform_control_flow, after: remap work so that no lane needs a branch.

Each thread takes four consecutive columns (one float4: types 0, 1, 2, 3 in order, since the row length
is a multiple of 4) and applies the four bodies in sequence. All 32 lanes run every body, so a warp
finishes 128 elements in the time the divergent version needed for 32.
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

__global__ void typed_act_uniform(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = x[i];
    y[i] = make_float4(gelu_erf(v.x), silu(v.y), mish(v.z), softplus(v.w));
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 2, "x: 2-D float32 CUDA");
    TORCH_CHECK(x.size(1) % 4 == 0, "row length must be a multiple of 4 (type pattern per float4)");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n4 = x.numel() / 4;
    typed_act_uniform<<<(unsigned)((n4 + 255) / 256), 256>>>(
        reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x);"

_ext = load_inline(
    name="kb_warp_uniform_control_flow_after",
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
