"""Blind-set kernel bl13_sgemm_naive: a first CUDA version of the task (C = A @ B (fp32, square); one thread per output, operands read straight from global memory)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void sgemm_naive_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}

torch::Tensor sgemm(torch::Tensor a, torch::Tensor b) {
    int M = a.size(0), K = a.size(1), N = b.size(1);
    auto c = torch::empty({M, N}, a.options());
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16);
    sgemm_naive_kernel<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

CPP_SRC = """
torch::Tensor sgemm(torch::Tensor a, torch::Tensor b);
"""

_ext = load_inline(
    name="blind_bl13_sgemm_naive",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['sgemm'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.sgemm(a.contiguous(), b.contiguous())
