import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#define VPT 4   // float4 per thread, D == 4 * VPT * blockDim.x (checked on the host)

__global__ void rmsnorm_vec4_kernel(const float4* __restrict__ x, const float4* __restrict__ w,
                                    float4* __restrict__ y, int d4, float eps) {
    __shared__ float partial[32];
    const float4* xr = x + (long)blockIdx.x * d4;
    float4* yr = y + (long)blockIdx.x * d4;
    float4 vals[VPT];
    float ss = 0.0f;
    #pragma unroll
    for (int v = 0; v < VPT; ++v) {
        vals[v] = xr[threadIdx.x + v * blockDim.x];
        ss += vals[v].x * vals[v].x + vals[v].y * vals[v].y + vals[v].z * vals[v].z + vals[v].w * vals[v].w;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < (blockDim.x >> 5); ++i) total += partial[i];
    float inv = rsqrtf(total / (d4 * 4) + eps);
    #pragma unroll
    for (int v = 0; v < VPT; ++v) {
        float4 g = w[threadIdx.x + v * blockDim.x];
        float4 o = vals[v];
        yr[threadIdx.x + v * blockDim.x] = make_float4(o.x * inv * g.x, o.y * inv * g.y, o.z * inv * g.z, o.w * inv * g.w);
    }
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps) {
    int D = x.size(-1);
    TORCH_CHECK(D % (4 * VPT * 256) == 0, "D must be a multiple of 4096");
    int rows = x.numel() / D;
    auto y = torch::empty_like(x);
    rmsnorm_vec4_kernel<<<rows, D / (4 * VPT)>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
        reinterpret_cast<const float4*>(w.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()),
        D / 4, (float)eps);
    return y;
}
"""

ext = load_inline(name="rmsnorm_vec4", cpp_sources="torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps);",
                  cuda_sources=cuda_source, functions=["rmsnorm"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return ext.rmsnorm(x, self.weight, 1e-6)
