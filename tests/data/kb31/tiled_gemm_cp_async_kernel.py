"""A 32x32 shared-memory tiled SGEMM whose tiles arrive by cp.async into two stages (a test kernel of
issue 31, not a KB example): one output per thread, so the inner loop issues two shared loads per FMA."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define TILE 32

__device__ __forceinline__ void cp_async4(float* smem, const float* gmem) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(s), "l"(gmem));
}

__global__ void __launch_bounds__(1024) tiled_sgemm_async(const float* __restrict__ A, const float* __restrict__ B,
                                                          float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[2][TILE][TILE];
    __shared__ float Bs[2][TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    int tiles = K / TILE;
    cp_async4(&As[0][ty][tx], &A[row * K + tx]);
    cp_async4(&Bs[0][ty][tx], &B[ty * N + col]);
    asm volatile("cp.async.commit_group;\n" ::);
    float acc = 0.f;
    for (int t = 0; t < tiles; ++t) {
        int cur = t & 1;
        if (t + 1 < tiles) {
            cp_async4(&As[cur ^ 1][ty][tx], &A[row * K + (t + 1) * TILE + tx]);
            cp_async4(&Bs[cur ^ 1][ty][tx], &B[((t + 1) * TILE + ty) * N + col]);
        }
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[cur][ty][k] * Bs[cur][k][tx];
        __syncthreads();
    }
    C[row * N + col] = acc;
}

torch::Tensor sgemm(torch::Tensor a, torch::Tensor b) {
    int M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(M % TILE == 0 && N % TILE == 0 && K % TILE == 0, "sizes must be multiples of 32");
    auto c = torch::empty({M, N}, a.options());
    dim3 block(TILE, TILE), grid(N / TILE, M / TILE);
    tiled_sgemm_async<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

CPP = "torch::Tensor sgemm(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(name="kb31_tiled_sgemm_async", cpp_sources=CPP, cuda_sources=CUDA, functions=["sgemm"],
                   extra_cuda_cflags=["-O3", "-arch=sm_90"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.sgemm(a.contiguous(), b.contiguous())
