"""library_gemm_epilogue_fusion, after: cuBLAS keeps the GEMM (torch.matmul, a LIBRARY CALL: the protocol
allows cuBLAS for the GEMM part; TF32 stays off), and bias + scale + LeakyReLU run as ONE custom kernel, in
place on the GEMM output, four columns per thread with float4: the output makes one extra round trip
through DRAM instead of three, and two launches and two temporaries are gone."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float act(float v, float b, float s, float slope) {
    v = (v + b) * s;                 // the reference's order: bias after the full K sum, then scale
    return v > 0.f ? v : v * slope;
}

// y[r][c] = leaky((y[r][c] + bias[c]) * s), in place; cols % 4 == 0 for the float4 path
__global__ void bias_scale_leaky_vec4(float4* __restrict__ y, const float4* __restrict__ bias, long n4, int cols4,
                                      float s, float slope) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = y[i];
        const float4 b = __ldg(bias + (int)(i % cols4));
        v.x = act(v.x, b.x, s, slope); v.y = act(v.y, b.y, s, slope);
        v.z = act(v.z, b.z, s, slope); v.w = act(v.w, b.w, s, slope);
        y[i] = v;
    }
}

__global__ void bias_scale_leaky(float* __restrict__ y, const float* __restrict__ bias, long n, int cols, float s,
                                 float slope) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = act(y[i], bias[i % cols], s, slope);
}

torch::Tensor epilogue_(torch::Tensor g, torch::Tensor bias, double multiplier, double slope) {
    TORCH_CHECK(g.is_cuda() && g.dtype() == torch::kFloat32 && g.dim() == 2 && g.is_contiguous(),
                "g: contiguous fp32 CUDA matrix");
    bias = bias.contiguous();
    const long n = g.numel();
    const int cols = (int)g.size(1);
    if (n == 0) return g;
    const bool vec = cols % 4 == 0 && (reinterpret_cast<uintptr_t>(g.data_ptr<float>()) & 15) == 0
                     && (reinterpret_cast<uintptr_t>(bias.data_ptr<float>()) & 15) == 0;
    if (vec) {
        const long n4 = n / 4;
        const int blocks = (int)std::min<long>((n4 + 255) / 256, 132L * 16);
        bias_scale_leaky_vec4<<<blocks, 256>>>(reinterpret_cast<float4*>(g.data_ptr<float>()),
                                               reinterpret_cast<const float4*>(bias.data_ptr<float>()), n4,
                                               cols / 4, (float)multiplier, (float)slope);
    } else {
        const int blocks = (int)std::min<long>((n + 255) / 256, 132L * 16);
        bias_scale_leaky<<<blocks, 256>>>(g.data_ptr<float>(), bias.data_ptr<float>(), n, cols,
                                          (float)multiplier, (float)slope);
    }
    return g;
}
"""

CPP_SRC = "torch::Tensor epilogue_(torch::Tensor g, torch::Tensor bias, double multiplier, double slope);"

_ext = load_inline(
    name="kb_library_gemm_epilogue_fusion_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["epilogue_"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, multiplier: float, negative_slope: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = torch.matmul(x, self.gemm.weight.t())   # cuBLAS SGEMM (library call, allowed for the GEMM part)
        return _ext.epilogue_(g, self.gemm.bias, self.multiplier, self.negative_slope)
