"""Held-out: matrix-vector product y = A @ x (A 8192 x 8192 fp32), one thread per row walking its row
(KernelBench L1 "Matrix_vector_multiplication", a typical first attempt)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void gemv_kernel(const float* A, const float* x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += A[row * K + k] * x[k];
        }
        y[row] = sum;
    }
}

torch::Tensor gemv_cuda(torch::Tensor A, torch::Tensor x) {
    int M = A.size(0), K = A.size(1);
    auto y = torch::empty({M, 1}, A.options());
    int threads = 256;
    gemv_kernel<<<(M + threads - 1) / threads, threads>>>(A.data_ptr<float>(), x.data_ptr<float>(),
                                                         y.data_ptr<float>(), M, K);
    return y;
}
"""

cpp_source = "torch::Tensor gemv_cuda(torch::Tensor A, torch::Tensor x);"

gemv = load_inline(name="heldout_gemv_rowthread", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["gemv_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return gemv.gemv_cuda(A.contiguous(), B.contiguous())
