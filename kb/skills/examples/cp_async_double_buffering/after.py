"""cp_async_double_buffering, after: two shared-memory stages filled by cp.async
(__pipeline_memcpy_async, 16-byte LDGSTS that bypass registers); the copy of k tile t+1 is in flight
while tile t is computed, with commit / wait_prior(1) / __syncthreads marking when a stage is ready
and when it may be overwritten."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_pipeline.h>
#include <cstdint>
#define BM 64
#define BN 64
#define BK 16
#define APAD 4
// Two shared stages. While the block computes on stage s, cp.async (global -> shared without
// registers) fills stage s^1 with the next k tile. 16-byte copies when the 4-float chunk is in range
// and aligned, 4-byte copies or zero fill at the edges.
__global__ void __launch_bounds__(256) sgemm_cpasync(const float* __restrict__ A, const float* __restrict__ B,
                                                     float* __restrict__ C, int M, int N, int K, int vecA, int vecB) {
    __shared__ __align__(16) float As[2][BM][BK + APAD];   // row-major: cp.async cannot transpose
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    // one 16-byte chunk of A (64 rows x 4 chunks) and one of B (16 rows x 16 chunks) per thread per tile
    const int am = tid / 4, ak = (tid % 4) * 4;
    const int bk = tid / 16, bn = (tid % 16) * 4;
    auto load_tile = [&](int stage, int k0) {
        {
            int gm = row0 + am, gk = k0 + ak;
            float* dst = &As[stage][am][ak];
            if (vecA && gm < M && gk + 3 < K) {
                __pipeline_memcpy_async(dst, A + (long)gm * K + gk, 16);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    if (gm < M && gk + e < K) __pipeline_memcpy_async(dst + e, A + (long)gm * K + gk + e, 4);
                    else dst[e] = 0.0f;
                }
            }
        }
        {
            int gk = k0 + bk, gn = col0 + bn;
            float* dst = &Bs[stage][bk][bn];
            if (vecB && gk < K && gn + 3 < N) {
                __pipeline_memcpy_async(dst, B + (long)gk * N + gn, 16);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    if (gk < K && gn + e < N) __pipeline_memcpy_async(dst + e, B + (long)gk * N + gn + e, 4);
                    else dst[e] = 0.0f;
                }
            }
        }
    };
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    const int ntiles = (K + BK - 1) / BK;
    load_tile(0, 0);
    __pipeline_commit();
    for (int t = 0; t < ntiles; ++t) {
        const int s = t & 1;
        if (t + 1 < ntiles) load_tile(s ^ 1, (t + 1) * BK);   // prefetch next tile into the other stage
        __pipeline_commit();
        __pipeline_wait_prior(1);                              // tile t has landed (t+1 may be in flight)
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float av[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) av[i] = As[s][ty * 4 + i][k];
            float4 b4 = *reinterpret_cast<const float4*>(&Bs[s][k][tx * 4]);
            float bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();                                       // stage s is free for tile t+2
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int r = row0 + ty * 4 + i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int cc = col0 + tx * 4 + j;
            if (cc < N) C[(long)r * N + cc] = acc[i][j];
        }
    }
}

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    int M = (int)a.size(0), K = (int)a.size(1), N = (int)b.size(1);
    auto c = torch::empty({(int64_t)M, (int64_t)N}, a.options());
    if (M == 0 || N == 0) return c;
    int vecA = (K % 4 == 0) && (reinterpret_cast<uintptr_t>(a.data_ptr<float>()) % 16 == 0);
    int vecB = (N % 4 == 0) && (reinterpret_cast<uintptr_t>(b.data_ptr<float>()) % 16 == 0);
    dim3 grd((N + BN - 1) / BN, (M + BM - 1) / BM);
    sgemm_cpasync<<<grd, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K, vecA, vecB);
    return c;
}
"""

CPP_SRC = "torch::Tensor matmul(torch::Tensor a, torch::Tensor b);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_cp_async_double_buffering_after",
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
