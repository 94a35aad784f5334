"""tensor_core_mma, before: fp16 data converted to fp32 and multiplied on the FP32 pipe with 32 x 32
shared tiles; the tensor cores (~15x the FP32 rate for fp16 on H200) sit idle."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_fp16.h>
#include <cstdint>
#define T 32
// fp16 in, fp32 accumulate on the FP32 pipe (CUDA cores), 32 x 32 shared tiles, one output per thread.
__global__ void hgemm_cudacore(const __half* __restrict__ X, const __half* __restrict__ W, __half* __restrict__ C,
                               int M, int N, int K) {
    __shared__ float Xs[T][T + 1];
    __shared__ float Ws[T][T + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    int wrow = blockIdx.x * T + ty;            // W row (= output column) loaded by this thread
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        Xs[ty][tx] = (row < M && k0 + tx < K) ? __half2float(X[(long)row * K + k0 + tx]) : 0.0f;
        Ws[ty][tx] = (wrow < N && k0 + tx < K) ? __half2float(W[(long)wrow * K + k0 + tx]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) acc += Xs[ty][k] * Ws[tx][k];
        __syncthreads();
    }
    if (row < M && col < N) C[(long)row * N + col] = __float2half(acc);
}

torch::Tensor linear_nt(torch::Tensor x, torch::Tensor w) {
    int M = (int)x.size(0), K = (int)x.size(1), N = (int)w.size(0);
    auto c = torch::empty({(int64_t)M, (int64_t)N}, x.options());
    if (M == 0 || N == 0) return c;
    const __half* xp = reinterpret_cast<const __half*>(x.data_ptr());
    const __half* wp = reinterpret_cast<const __half*>(w.data_ptr());
    __half* cp = reinterpret_cast<__half*>(c.data_ptr());
    int vec = (K % 8 == 0) && (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(wp) % 16 == 0);
    (void)vec; dim3 blk(T, T); dim3 grd((N + T - 1) / T, (M + T - 1) / T);
    hgemm_cudacore<<<grd, blk>>>(xp, wp, cp, M, N, K);
    return c;
}
"""

CPP_SRC = "torch::Tensor linear_nt(torch::Tensor x, torch::Tensor w);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_tensor_core_mma_before",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['linear_nt'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return _ext().linear_nt(x.contiguous(), w.contiguous())
