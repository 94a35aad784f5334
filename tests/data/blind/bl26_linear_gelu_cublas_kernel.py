"""Blind-set kernel bl26_linear_gelu_cublas: a first CUDA version of the task (y = gelu(x @ W + b); the GEMM stays in torch (cuBLAS), a custom kernel adds the bias and applies GELU)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void bias_gelu_kernel(const float* h, const float* b, float* y, long n, int cols) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = h[i] + b[i % cols];
        y[i] = 0.5f * v * (1.f + erff(v * 0.70710678f));
    }
}

torch::Tensor bias_gelu(torch::Tensor h, torch::Tensor b) {
    auto y = torch::empty_like(h);
    long n = h.numel();
    bias_gelu_kernel<<<(n + 255) / 256, 256>>>(h.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n, (int)h.size(1));
    return y;
}
"""

CPP_SRC = """
torch::Tensor bias_gelu(torch::Tensor h, torch::Tensor b);
"""

_ext = load_inline(
    name="blind_bl26_linear_gelu_cublas",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['bias_gelu'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x, w, b):
        h = torch.matmul(x, w)
        return _ext.bias_gelu(h.contiguous(), b.contiguous())
