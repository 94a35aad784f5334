import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cublas_v2.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void add_bias_gelu_kernel(float* __restrict__ y, const float* __restrict__ b, int M, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < M * N) {
        float v = y[idx] + b[idx % N];
        y[idx] = 0.5f * v * (1.f + erff(v * 0.7071067811865475f));
    }
}

torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    const float alpha = 1.f, beta = 0.f;
    // row-major y = x * w^T  ==  column-major y^T = w * x^T
    cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w.data_ptr<float>(), K, x.data_ptr<float>(), K,
                &beta, y.data_ptr<float>(), N);
    add_bias_gelu_kernel<<<(M * N + 255) / 256, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), M, N);
    return y;
}
"""
ext = load_inline(name="lin_gelu_cublas", cpp_sources="torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
                  cuda_sources=cuda_src, functions=["linear_gelu"], extra_ldflags=["-lcublas"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fout, fin))
        self.bias = nn.Parameter(torch.randn(fout))

    def forward(self, x):
        return ext.linear_gelu(x, self.weight, self.bias)
