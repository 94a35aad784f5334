"""warp_tiling_fp32_gemm, before: block-level register blocking only. A 64 x 64 block tile, 256 threads as
16 x 16, each thread a 4 x 4 outputs read as two float4 from shared memory per k (16 FFMA per 2 LDS.128).
The mapping of threads to outputs ignores warps: a warp covers 2 rows x 16 columns of 4 x 4 tiles, so its
A reads hit 2 addresses and its B reads 16; the block tile is small, so each loaded element is reused only
64 times from shared memory."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define BM 64
#define BN 64
#define BK 16

__global__ void __launch_bounds__(256) sgemm_rb4x4(const float* __restrict__ A, const float* __restrict__ B,
                                                    float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) float As[BK][BM + 4];
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
            const int m = i / BK, k = i % BK, gm = row0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? A[(size_t)gm * K + gk] : 0.0f;
        }
#pragma unroll
        for (int i = tid; i < BK * BN; i += 256) {
            const int k = i / BN, n = i % BN, gk = k0 + k, gn = col0 + n;
            Bs[k][n] = (gk < K && gn < N) ? B[(size_t)gk * N + gn] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a4 = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            const float4 b4 = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            const float av[4] = {a4.x, a4.y, a4.z, a4.w};
            const float bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = row0 + ty * 4 + i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int cc = col0 + tx * 4 + j;
            if (cc < N) C[(size_t)r * N + cc] = acc[i][j];
        }
    }
}

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.dtype() == torch::kFloat32 && b.dtype() == torch::kFloat32,
                "fp32 CUDA tensors expected");
    a = a.contiguous(); b = b.contiguous();
    const int M = (int)a.size(0), K = (int)a.size(1), N = (int)b.size(1);
    auto c = torch::empty({(int64_t)M, (int64_t)N}, a.options());
    if (M == 0 || N == 0) return c;
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    sgemm_rb4x4<<<grid, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

CPP_SRC = "torch::Tensor matmul(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="kb_warp_tiling_fp32_gemm_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["matmul"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.matmul(a, b)
