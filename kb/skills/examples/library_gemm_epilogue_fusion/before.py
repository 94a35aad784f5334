"""library_gemm_epilogue_fusion, before: the GEMM is already cuBLAS's (torch.matmul, a LIBRARY CALL: the
protocol allows cuBLAS for the GEMM part), but bias, scale and LeakyReLU are three custom kernels, each
reading and writing the whole 16384 x 4096 output: three extra round trips of 268 MB through DRAM."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__global__ void add_bias(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y,
                         long n, int cols) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = x[i] + b[i % cols];
}

__global__ void scale(const float* __restrict__ x, float* __restrict__ y, long n, float s) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = x[i] * s;
}

__global__ void leaky_relu(const float* __restrict__ x, float* __restrict__ y, long n, float slope) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = x[i] > 0.f ? x[i] : x[i] * slope;
}

torch::Tensor epilogue(torch::Tensor g, torch::Tensor bias, double multiplier, double slope) {
    TORCH_CHECK(g.is_cuda() && g.dtype() == torch::kFloat32 && g.dim() == 2, "g: fp32 CUDA matrix");
    g = g.contiguous(); bias = bias.contiguous();
    const long n = g.numel();
    const int cols = (int)g.size(1);
    auto t1 = torch::empty_like(g), t2 = torch::empty_like(g), y = torch::empty_like(g);
    if (n == 0) return y;
    const int blocks = (int)std::min<long>((n + 255) / 256, 132L * 16);
    add_bias<<<blocks, 256>>>(g.data_ptr<float>(), bias.data_ptr<float>(), t1.data_ptr<float>(), n, cols);
    scale<<<blocks, 256>>>(t1.data_ptr<float>(), t2.data_ptr<float>(), n, (float)multiplier);
    leaky_relu<<<blocks, 256>>>(t2.data_ptr<float>(), y.data_ptr<float>(), n, (float)slope);
    return y;
}
"""

CPP_SRC = "torch::Tensor epilogue(torch::Tensor g, torch::Tensor bias, double multiplier, double slope);"

_ext = load_inline(
    name="kb_library_gemm_epilogue_fusion_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["epilogue"],
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
        return _ext.epilogue(g, self.gemm.bias, self.multiplier, self.negative_slope)
