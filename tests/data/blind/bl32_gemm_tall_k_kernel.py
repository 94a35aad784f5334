"""Blind-set kernel bl32_gemm_tall_k: a first CUDA version of the task (C = A @ B with a small output (128 x 128) and a long reduction (K = 65536); 32x32 shared tiles)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

#define T 32
__global__ void gemm_tiled32_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float as[T][T + 1];
    __shared__ float bs[T][T + 1];
    int tx = threadIdx.x, ty = threadIdx.y;  // block is 32 x 8, each thread owns 4 rows
    int col = blockIdx.x * T + tx;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += T) {
        for (int j = 0; j < 4; ++j) {
            int r = ty + 8 * j;
            as[r][tx] = A[(long)(blockIdx.y * T + r) * K + k0 + tx];
            bs[r][tx] = B[(long)(k0 + r) * N + col];
        }
        __syncthreads();
        for (int k = 0; k < T; ++k) {
            float bv = bs[k][tx];
            for (int j = 0; j < 4; ++j) acc[j] += as[ty + 8 * j][k] * bv;
        }
        __syncthreads();
    }
    for (int j = 0; j < 4; ++j) C[(long)(blockIdx.y * T + ty + 8 * j) * N + col] = acc[j];
}

torch::Tensor gemm_tallk(torch::Tensor a, torch::Tensor b) {
    int M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(M % T == 0 && N % T == 0 && K % T == 0, "sizes must be multiples of 32");
    auto c = torch::empty({M, N}, a.options());
    dim3 block(T, 8);
    dim3 grid(N / T, M / T);
    gemm_tiled32_kernel<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

CPP_SRC = """
torch::Tensor gemm_tallk(torch::Tensor a, torch::Tensor b);
"""

_ext = load_inline(
    name="blind_bl32_gemm_tall_k",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['gemm_tallk'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.gemm_tallk(a.contiguous(), b.contiguous())
