"""tensor_core_mma, after: WMMA (nvcuda::wmma 16x16x16, fp16 inputs, fp32 accumulators) on tensor
cores; 64 x 64 block tile, 4 warps of 2 x 2 fragments, padded shared tiles filled by 16-byte loads,
fp32 results staged in shared memory for a bounds-checked fp16 store. Works on sm_70+ (Ampere and
Hopper)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_fp16.h>
#include <mma.h>
#include <cstdint>
using namespace nvcuda;
#define TBM 64
#define TBN 64
#define TBK 32
#define LDS (TBK + 8)     // +8 halves (16 B) of padding: ldm stays a multiple of 8, rows shift banks
#define LDC (32 + 4)

__device__ __forceinline__ void load8(__half* dst, const __half* __restrict__ src, int r, int k, int R, int K, int vec) {
    if (vec && r < R && k + 8 <= K) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src + (long)r * K + k);   // 16-byte load
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) dst[e] = (r < R && k + e < K) ? src[(long)r * K + k + e] : __float2half(0.0f);
    }
}

// 128 threads = 4 warps in a 2 x 2 arrangement; each warp owns a 32 x 32 output tile = 2 x 2 WMMA
// 16x16x16 fragments (fp16 inputs, fp32 accumulators on the tensor cores).
__global__ void __launch_bounds__(128) hgemm_wmma(const __half* __restrict__ X, const __half* __restrict__ W,
                                                  __half* __restrict__ C, int M, int N, int K, int vec) {
    __shared__ __align__(32) __half Xs[TBM][LDS];
    __shared__ __align__(32) __half Ws[TBN][LDS];
    __shared__ __align__(32) float Cs[4][32][LDC];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / 2, wn = warp % 2;
    const int row0 = blockIdx.y * TBM, col0 = blockIdx.x * TBN;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < K; k0 += TBK) {
        for (int c = threadIdx.x; c < TBM * TBK / 8; c += 128) {
            int r = c / (TBK / 8), kc = (c % (TBK / 8)) * 8;
            load8(&Xs[r][kc], X, row0 + r, k0 + kc, M, K, vec);
            load8(&Ws[r][kc], W, col0 + r, k0 + kc, N, K, vec);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TBK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];   // B(k, n) = W[n][k]
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &Xs[wm * 32 + i * 16][kk], LDS);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Ws[wn * 32 + j * 16][kk], LDS);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(&Cs[warp][i * 16][j * 16], acc[i][j], LDC, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 32 * 32; e += 32) {     // bounds-checked fp32 -> fp16 store through shared memory
        int r = e / 32, cc = e % 32;
        int gr = row0 + wm * 32 + r, gc = col0 + wn * 32 + cc;
        if (gr < M && gc < N) C[(long)gr * N + gc] = __float2half(Cs[warp][r][cc]);
    }
}

torch::Tensor linear_nt(torch::Tensor x, torch::Tensor w) {
    int M = (int)x.size(0), K = (int)x.size(1), N = (int)w.size(0);
    auto c = torch::empty({(int64_t)M, (int64_t)N}, x.options());
    if (M == 0 || N == 0) return c;
    const __half* xp = reinterpret_cast<const __half*>(x.data_ptr());
    const __half* wp = reinterpret_cast<const __half*>(w.data_ptr());
    __half* cp = reinterpret_cast<__half*>(c.data_ptr());
    int vec = (K % 8 == 0) && (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(wp) % 16 == 0);
    dim3 grd((N + TBN - 1) / TBN, (M + TBM - 1) / TBM);
    hgemm_wmma<<<grd, 128>>>(xp, wp, cp, M, N, K, vec);
    return c;
}
"""

CPP_SRC = "torch::Tensor linear_nt(torch::Tensor x, torch::Tensor w);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_tensor_core_mma_after",
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
