"""block_swizzle_l2, after: the same kernel with grouped ("swizzled") tile order, GROUP_M = 8.

Consecutive block ids walk down 8 tile rows before moving right, so blocks in flight touch 8 panels of A
and only about 32 of B's 64-column panels; both stay in L2 while they are reused. The tile math is
unchanged, only the block-id -> tile mapping differs.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define GROUP 8

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

// 1-D grid; GROUP_M == 1 is the plain row-major raster (tile_n fastest), GROUP_M > 1 runs GROUP_M tile
// rows side by side so that blocks in flight share A panels and B panels.
template <int GROUP_M>
__global__ void __launch_bounds__(256) sgemm_raster(const float* __restrict__ A, const float* __restrict__ B,
                                                    float* __restrict__ C, int M, int N, int K) {
    int tiles_m = M / BM, tiles_n = N / BN, bid = blockIdx.x;
    int tile_m, tile_n;
    if (GROUP_M == 1) {
        tile_m = bid / tiles_n; tile_n = bid % tiles_n;
    } else {
        int per_group = GROUP_M * tiles_n;
        int first_m = (bid / per_group) * GROUP_M;
        int rows = min(tiles_m - first_m, GROUP_M);
        int in_group = bid % per_group;
        tile_m = first_m + in_group % rows;
        tile_n = in_group / rows;
    }
    sgemm_tile<false>(A, B, C, M, N, K, tile_m, tile_n, 0, K);
}

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && a.dtype() == torch::kFloat32 && b.dtype() == torch::kFloat32, "float32 CUDA");
    a = a.contiguous(); b = b.contiguous();
    int M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(b.size(0) == K && M % BM == 0 && N % BN == 0 && K % BK == 0, "shapes must be multiples of 64/64/16");
    auto c = torch::empty({M, N}, a.options());
    unsigned blocks = (M / BM) * (N / BN);
    sgemm_raster<GROUP><<<blocks, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

CPP_SRC = "torch::Tensor matmul(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="kb_block_swizzle_l2_after",
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
