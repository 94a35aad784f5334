"""online_softmax, before: the textbook three passes over each row (max, sum of exp, normalise).

Each row is 1 MB and all 256 rows are in flight at once, so the second and third reads of a row come
from DRAM, not L2: 3 reads + 1 write of the tensor.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#include <math.h>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// Block-wide reduction; every thread gets the result.
template <bool IS_MAX>
__device__ float block_reduce(float v, float* sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    float r = (lane < nw) ? sh[lane] : (IS_MAX ? -INFINITY : 0.f);
    r = IS_MAX ? warp_max(r) : warp_sum(r);
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(1024, 2)
softmax_three_pass(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float sh[32];
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)blockIdx.x * n);
    float4* yr = reinterpret_cast<float4*>(y + (size_t)blockIdx.x * n);
    int n4 = n >> 2;
    // pass 1: max
    float m = -INFINITY;
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = xr[i];
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    m = block_reduce<true>(m, sh);
    // pass 2: sum of exp (reads the row again)
    float s = 0.f;
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = xr[i];
        s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
    }
    s = block_reduce<false>(s, sh);
    float inv = 1.f / s;
    // pass 3: normalise (reads the row a third time)
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = xr[i];
        v.x = expf(v.x - m) * inv; v.y = expf(v.y - m) * inv;
        v.z = expf(v.z - m) * inv; v.w = expf(v.w - m) * inv;
        yr[i] = v;
    }
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 2, "x: 2-D float32 CUDA");
    x = x.contiguous();
    int rows = x.size(0), n = x.size(1);
    TORCH_CHECK(n % 4 == 0, "row length must be a multiple of 4");
    auto y = torch::empty_like(x);
    softmax_three_pass<<<rows, 1024>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor softmax_rows(torch::Tensor x);"

_ext = load_inline(
    name="kb_online_softmax_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["softmax_rows"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_rows(x)
