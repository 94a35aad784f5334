"""Held-out: Linear + bias + ReLU (KernelBench L2 style, x 8192 x 4096 @ W^T 4096 x 4096, fp32): the
GEMM through cuBLAS (cublasSgemm, no bias), then a bias-add kernel and a ReLU kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

__global__ void add_bias_kernel(float* y, const float* bias, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) y[idx] += bias[idx % cols];
}

__global__ void relu_kernel(float* y, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) y[idx] = fmaxf(y[idx], 0.0f);
}

torch::Tensor linear_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    const float alpha = 1.0f, beta = 0.0f;
    // row-major y = x @ w^T  ==  column-major y^T = w @ x^T
    cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w.data_ptr<float>(), K,
                x.data_ptr<float>(), K, &beta, y.data_ptr<float>(), N);
    int total = M * N;
    add_bias_kernel<<<(total + 255) / 256, 256>>>(y.data_ptr<float>(), bias.data_ptr<float>(), M, N);
    relu_kernel<<<(total + 255) / 256, 256>>>(y.data_ptr<float>(), total);
    return y;
}
"""

cpp_source = "torch::Tensor linear_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias);"

ext = load_inline(name="heldout_cublas_bias_relu_chain", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["linear_bias_relu"], extra_ldflags=["-lcublas"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features: int = 4096, out_features: int = 4096) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.02)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.linear_bias_relu(x.contiguous(), self.weight, self.bias)
