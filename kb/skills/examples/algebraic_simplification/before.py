"""algebraic_simplification, before: compute what the reference writes: the full Linear, then the sum.

A 16384 x 1024 x 1024 SGEMM (34 GFLOP) writes a 64 MB intermediate that a second kernel sums per row.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

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

__global__ void __launch_bounds__(256) linear_kernel(const float* __restrict__ X, const float* __restrict__ W,
                                                     float* __restrict__ Y, int M, int N, int K) {
    sgemm_tile<true>(X, W, Y, M, N, K, blockIdx.y, blockIdx.x, 0, K);
}

// one warp per row: out[r] = sum_j (y[r, j] + bias[j])
__global__ void rowsum_bias(const float* __restrict__ y, const float* __restrict__ bias, float* __restrict__ out,
                            int rows, int cols) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (r >= rows) return;
    float s = 0.f;
    for (int j = lane; j < cols; j += 32) s += y[(size_t)r * cols + j] + bias[j];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) out[r] = s;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32, "float32 CUDA");
    x = x.contiguous(); w = w.contiguous(); b = b.contiguous();
    int M = x.size(0), K = x.size(1), N = w.size(0);
    TORCH_CHECK(w.size(1) == K && M % BM == 0 && N % BN == 0 && K % BK == 0, "shapes must be multiples of 64/64/16");
    auto y = torch::empty({M, N}, x.options());
    linear_kernel<<<dim3(N / BN, M / BM), 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
    auto out = torch::empty({M, 1}, x.options());
    rowsum_bias<<<(M + 7) / 8, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), M, N);
    return out;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="kb_algebraic_simplification_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.linear.weight, self.linear.bias)
