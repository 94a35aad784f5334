"""Blind-set kernel bl35_residual_bias_gelu_two_kernels: a first CUDA version of the task (y = gelu(x + residual + bias[col]); two float4 kernels (add, then GELU) through a temporary)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void add3_kernel(const float4* x, const float4* r, const float* bias, float4* t, long n4, int cols4) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 a = x[i], b = r[i];
    const float4 c = reinterpret_cast<const float4*>(bias)[i % cols4];
    t[i] = make_float4(a.x + b.x + c.x, a.y + b.y + c.y, a.z + b.z + c.z, a.w + b.w + c.w);
}

__device__ __forceinline__ float gelu_tanh(float v) {
    return 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

__global__ void gelu4_kernel(const float4* t, float4* y, long n4) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = t[i];
    y[i] = make_float4(gelu_tanh(v.x), gelu_tanh(v.y), gelu_tanh(v.z), gelu_tanh(v.w));
}

torch::Tensor residual_bias_gelu(torch::Tensor x, torch::Tensor r, torch::Tensor bias) {
    TORCH_CHECK(x.size(1) % 4 == 0, "columns must be a multiple of 4");
    auto t = torch::empty_like(x);
    auto y = torch::empty_like(x);
    long n4 = x.numel() / 4;
    int cols4 = x.size(1) / 4;
    int blocks = (n4 + 255) / 256;
    add3_kernel<<<blocks, 256>>>((const float4*)x.data_ptr<float>(), (const float4*)r.data_ptr<float>(), bias.data_ptr<float>(), (float4*)t.data_ptr<float>(), n4, cols4);
    gelu4_kernel<<<blocks, 256>>>((const float4*)t.data_ptr<float>(), (float4*)y.data_ptr<float>(), n4);
    return y;
}
"""

CPP_SRC = """
torch::Tensor residual_bias_gelu(torch::Tensor x, torch::Tensor r, torch::Tensor bias);
"""

_ext = load_inline(
    name="blind_bl35_residual_bias_gelu_two_kernels",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['residual_bias_gelu'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x, residual, bias):
        return _ext.residual_bias_gelu(x.contiguous(), residual.contiguous(), bias.contiguous())
