"""shared_memory_tiling, after: 32 x 32 tiles of A and B are staged in shared memory by coalesced
loads; each element fetched from global is reused 32 times from shared memory, cutting global
traffic 32x. Out-of-range tile elements are zero-filled so any M, N, K works."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#define T 32
__global__ void sgemm_tile32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int M, int N, int K, float scale, int relu) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(long)row * K + k0 + tx] : 0.0f;   // coalesced along k
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(long)(k0 + ty) * N + col] : 0.0f; // coalesced along n
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];   // As: broadcast, Bs: consecutive banks
        __syncthreads();
    }
    if (row < M && col < N) {
        float v = acc;
        if (relu) v = fmaxf(v, 0.0f) * scale;
        C[(long)row * N + col] = v;
    }
}

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    int M = (int)a.size(0), K = (int)a.size(1), N = (int)b.size(1);
    auto c = torch::empty({(int64_t)M, (int64_t)N}, a.options());
    if (M == 0 || N == 0) return c;
    dim3 blk(T, T); dim3 grd((N + T - 1) / T, (M + T - 1) / T);
    sgemm_tile32<<<grd, blk>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K, 1.0f, 0);
    return c;
}
"""

CPP_SRC = "torch::Tensor matmul(torch::Tensor a, torch::Tensor b);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_shared_memory_tiling_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['matmul'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext().matmul(a.contiguous(), b.contiguous())
