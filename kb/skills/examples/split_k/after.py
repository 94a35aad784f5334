"""split_k, after: the same tile kernel, with K cut into splits so the grid fills every SM.

Splits are chosen for about four blocks per SM (each at least 256 deep); each writes a partial
64 x 64 tile into a workspace and a second kernel sums the partials in a fixed order (deterministic,
no atomics). Extra traffic: splits x M x N x 4 bytes written and read once (16 MB here).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#include <algorithm>

#define BM 64
#define BN 64
#define BK 16
#define APAD 4

// C tile (64 x 64) of A (M x K, row-major) times B (K x N row-major, or N x K when B_NK), over the
// k range [kbeg, kend). 256 threads, 4 x 4 outputs each, 16-wide k steps through shared memory.
// Requires M % 64 == 0, N % 64 == 0, K % 16 == 0 and 16-byte aligned rows (checked on the host).
template <bool B_NK>
__device__ __forceinline__ void sgemm_tile(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, int M, int N, int K,
                                           int tile_m, int tile_n, int kbeg, int kend) {
    __shared__ __align__(16) float As[BK][BM + APAD];
    __shared__ __align__(16) float Bs[BK][BN + APAD];
    int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    int row0 = tile_m * BM, col0 = tile_n * BN;
    int a_row = tid >> 2, a_k = (tid & 3) << 2;     // A: 64 rows x 16 k, one float4 per thread
    int b_k = tid >> 4, b_col = (tid & 15) << 2;    // B (K x N): 16 k x 64 cols
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    for (int k0 = kbeg; k0 < kend; k0 += BK) {
        float4 av = *reinterpret_cast<const float4*>(A + (size_t)(row0 + a_row) * K + k0 + a_k);
        As[a_k + 0][a_row] = av.x; As[a_k + 1][a_row] = av.y;
        As[a_k + 2][a_row] = av.z; As[a_k + 3][a_row] = av.w;
        if (B_NK) {   // B stored N x K (a Linear weight): same transposing load as A
            float4 bv = *reinterpret_cast<const float4*>(B + (size_t)(col0 + a_row) * K + k0 + a_k);
            Bs[a_k + 0][a_row] = bv.x; Bs[a_k + 1][a_row] = bv.y;
            Bs[a_k + 2][a_row] = bv.z; Bs[a_k + 3][a_row] = bv.w;
        } else {
            float4 bv = *reinterpret_cast<const float4*>(B + (size_t)(k0 + b_k) * N + col0 + b_col);
            *reinterpret_cast<float4*>(&Bs[b_k][b_col]) = bv;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float4 a = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
            float4 b = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
            float ar[4] = {a.x, a.y, a.z, a.w}, br[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float4*>(C + (size_t)(row0 + ty * 4 + i) * N + col0 + tx * 4) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

// grid (tiles_n, tiles_m, splits): split z multiplies the K range [z * chunk, (z + 1) * chunk)
__global__ void __launch_bounds__(256) sgemm_splitk_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                                           float* __restrict__ partial, int M, int N, int K, int chunk) {
    int kbeg = blockIdx.z * chunk, kend = min(K, kbeg + chunk);
    sgemm_tile<false>(A, B, partial + (size_t)blockIdx.z * M * N, M, N, K, blockIdx.y, blockIdx.x, kbeg, kend);
}

// Deterministic second pass: C = sum over splits of the partial tiles (fixed order, no atomics).
__global__ void reduce_splits(const float4* __restrict__ partial, float4* __restrict__ c, int splits, long mn4) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= mn4) return;
    float4 s = partial[i];
    for (int z = 1; z < splits; ++z) {
        float4 p = partial[(size_t)z * mn4 + i];
        s.x += p.x; s.y += p.y; s.z += p.z; s.w += p.w;
    }
    c[i] = s;
}

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && a.dtype() == torch::kFloat32 && b.dtype() == torch::kFloat32, "float32 CUDA");
    a = a.contiguous(); b = b.contiguous();
    int M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(b.size(0) == K && M % BM == 0 && N % BN == 0 && K % BK == 0, "shapes must be multiples of 64/64/16");
    static int sms = 0;
    if (sms == 0) { int dev = 0; cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); }
    int tiles = (M / BM) * (N / BN);
    // enough splits for about four blocks per SM, but keep each split at least 256 deep
    int splits = (4 * sms + tiles - 1) / tiles;
    splits = std::max(1, std::min(splits, K / 256));
    int chunk = ((K + splits - 1) / splits + BK - 1) / BK * BK;
    splits = (K + chunk - 1) / chunk;
    auto c = torch::empty({M, N}, a.options());
    if (splits == 1) {
        sgemm_splitk_kernel<<<dim3(N / BN, M / BM, 1), 256>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                              c.data_ptr<float>(), M, N, K, K);
        return c;
    }
    auto partial = torch::empty({splits, M, N}, a.options());
    sgemm_splitk_kernel<<<dim3(N / BN, M / BM, splits), 256>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                               partial.data_ptr<float>(), M, N, K, chunk);
    long mn4 = (long)M * N / 4;
    reduce_splits<<<(unsigned)((mn4 + 255) / 256), 256>>>(reinterpret_cast<const float4*>(partial.data_ptr<float>()),
                                                          reinterpret_cast<float4*>(c.data_ptr<float>()), splits, mn4);
    return c;
}
"""

CPP_SRC = "torch::Tensor matmul(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="kb_split_k_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["matmul"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.matmul(a, b)
