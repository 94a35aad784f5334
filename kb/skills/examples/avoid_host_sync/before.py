"""avoid_host_sync, before: reduce on the GPU, read the maximum back to the host, launch the scale.

Reading the scalar (cudaMemcpy to the host, plus a defensive cudaDeviceSynchronize) stalls the CPU
until the reduction has finished, and the second kernel is launched only after that: the GPU idles for
the round trip and the launch latency, and nothing can be queued ahead.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#include <cstring>

// max |x| over the tensor: block reduction, then one atomicMax on the float bits (valid for x >= 0).
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

__global__ void scale_by_value(const float4* __restrict__ x, float4* __restrict__ y, long n4, float inv) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) { float4 v = x[i]; y[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv); }
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.numel() % 4 == 0, "float32 CUDA, numel % 4 == 0");
    x = x.contiguous();
    long n4 = x.numel() / 4;
    auto mx = torch::empty({1}, x.options().dtype(torch::kInt32));
    cudaMemsetAsync(mx.data_ptr<int>(), 0, sizeof(int));
    absmax_kernel<<<132 * 8, 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()), n4,
                                   reinterpret_cast<unsigned*>(mx.data_ptr<int>()));
    cudaDeviceSynchronize();                      // "make sure the reduction is done"
    unsigned bits = 0;
    cudaMemcpy(&bits, mx.data_ptr<int>(), sizeof(unsigned), cudaMemcpyDeviceToHost);   // blocks the host
    float m;
    memcpy(&m, &bits, sizeof(float));
    auto y = torch::empty_like(x);
    scale_by_value<<<(unsigned)((n4 + 255) / 256), 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
                                                         reinterpret_cast<float4*>(y.data_ptr<float>()), n4, 1.f / m);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x);"

_ext = load_inline(
    name="kb_avoid_host_sync_before",
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
