"""avoid_host_sync, after: the scale kernel reads the maximum from device memory.

Same two kernels, but the scalar stays on the GPU: the second kernel loads it (one broadcast load per
thread) instead of receiving it as a host argument. The host enqueues memset, reduction and scale
back to back and returns at once; stream order guarantees the reduction finished first.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__global__ void absmax_kernel(const float4* __restrict__ x, long n4, unsigned* __restrict__ out) {
    __shared__ float sh[32];
    float m = 0.f;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) sh[warp] = m;
    __syncthreads();
    if (warp == 0) {
        m = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) atomicMax(out, __float_as_uint(m));
    }
}

__global__ void scale_by_device_max(const float4* __restrict__ x, float4* __restrict__ y, long n4,
                                    const unsigned* __restrict__ mx) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float inv = 1.f / __uint_as_float(*mx);
    float4 v = x[i];
    y[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.numel() % 4 == 0, "float32 CUDA, numel % 4 == 0");
    x = x.contiguous();
    long n4 = x.numel() / 4;
    auto mx = torch::empty({1}, x.options().dtype(torch::kInt32));
    cudaMemsetAsync(mx.data_ptr<int>(), 0, sizeof(int));
    absmax_kernel<<<132 * 8, 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()), n4,
                                   reinterpret_cast<unsigned*>(mx.data_ptr<int>()));
    auto y = torch::empty_like(x);
    scale_by_device_max<<<(unsigned)((n4 + 255) / 256), 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
        reinterpret_cast<float4*>(y.data_ptr<float>()), n4, reinterpret_cast<const unsigned*>(mx.data_ptr<int>()));
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x);"

_ext = load_inline(
    name="kb_avoid_host_sync_after",
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
