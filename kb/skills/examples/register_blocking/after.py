"""register_blocking, after: 64 x 64 block tile, each of 256 threads accumulates a 4 x 4 sub-tile in
registers; per k step a thread loads 4 A and 4 B values as two float4 shared loads and does 16 FMAs
(8x the FMA:LDS ratio of the 1-output kernel). A is stored k-major in shared memory to allow the
float4 reads."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#define BM 64
#define BN 64
#define BK 16
// 256 threads as a 16 x 16 grid; thread (ty, tx) owns the 4 x 4 outputs rows ty*4.., cols tx*4..
__global__ void __launch_bounds__(256) sgemm_rb(const float* __restrict__ A, const float* __restrict__ B,
                                                float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) float As[BK][BM + 4];   // A tile stored k-major so a thread reads 4 rows as one float4
    __shared__ __align__(16) float Bs[BK][BN + 4];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = tid; i < BM * BK; i += 256) {
            int m = i / BK, k = i % BK, gm = row0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? A[(long)gm * K + gk] : 0.0f;
        }
#pragma unroll
        for (int i = tid; i < BK * BN; i += 256) {
            int k = i / BN, n = i % BN, gk = k0 + k, gn = col0 + n;
            Bs[k][n] = (gk < K && gn < N) ? B[(long)gk * N + gn] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float4 a4 = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            float4 b4 = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            float av[4] = {a4.x, a4.y, a4.z, a4.w};
            float bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);   // 16 FMA per 2 LDS.128
        }
        __syncthreads();
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
    dim3 grd((N + BN - 1) / BN, (M + BM - 1) / BM);
    sgemm_rb<<<grd, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

CPP_SRC = "torch::Tensor matmul(torch::Tensor a, torch::Tensor b);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_register_blocking_after",
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
