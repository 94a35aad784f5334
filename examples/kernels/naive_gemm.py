"""A first, naive CUDA GEMM for examples/tasks/naive_gemm_task.py: one thread per output element,
every operand read straight from global memory (no tiling, no reuse through shared memory)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__global__ void naive_gemm_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, int m, int n, int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < m && col < n) {
        float acc = 0.0f;
        for (int i = 0; i < k; ++i) {
            acc += a[row * k + i] * b[i * n + col];
        }
        c[row * n + col] = acc;
    }
}

torch::Tensor naive_gemm(torch::Tensor a, torch::Tensor b) {
    int m = a.size(0), k = a.size(1), n = b.size(1);
    auto c = torch::empty({m, n}, a.options());
    dim3 block(16, 16);
    dim3 grid((n + block.x - 1) / block.x, (m + block.y - 1) / block.y);
    naive_gemm_kernel<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(),
                                       m, n, k);
    return c;
}
"""

cpp_source = "torch::Tensor naive_gemm(torch::Tensor a, torch::Tensor b);"

naive_gemm_ext = load_inline(
    name="ks_example_naive_gemm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["naive_gemm"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return naive_gemm_ext.naive_gemm(a.contiguous(), b.contiguous())
