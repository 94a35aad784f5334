"""epilogue_fusion, after: the same GEMM adds the bias and applies ReLU on its 4 x 4 register tile
before the only store; no temporary, no second kernel. Bias + ReLU after the full K sum keeps the
reference's order of operations."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#define BM 64
#define BN 64
#define BK 16
// C = X @ W^T (+ bias, relu when FUSE): X is M x K, W is N x K (nn.Linear layout), both k-contiguous.
template <bool FUSE>
__global__ void __launch_bounds__(256) linear_rb(const float* __restrict__ X, const float* __restrict__ W,
                                                 const float* __restrict__ bias, float* __restrict__ C,
                                                 int M, int N, int K) {
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
            int m = i / BK, k = i % BK, gm = row0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? X[(long)gm * K + gk] : 0.0f;
        }
#pragma unroll
        for (int i = tid; i < BN * BK; i += 256) {
            int n = i / BK, k = i % BK, gn = col0 + n, gk = k0 + k;
            Bs[k][n] = (gn < N && gk < K) ? W[(long)gn * K + gk] : 0.0f;
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
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
    float bj[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        int cc = col0 + tx * 4 + j;
        bj[j] = (FUSE && cc < N) ? __ldg(bias + cc) : 0.0f;   // bias read once per thread, kept in registers
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int r = row0 + ty * 4 + i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int cc = col0 + tx * 4 + j;
            if (cc >= N) continue;
            float v = acc[i][j];
            if (FUSE) v = fmaxf(v + bj[j], 0.0f);               // epilogue applied on the register tile
            C[(long)r * N + cc] = v;
        }
    }
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int M = (int)x.size(0), K = (int)x.size(1), N = (int)w.size(0);
    auto c = torch::empty({(int64_t)M, (int64_t)N}, x.options());
    if (M == 0 || N == 0) return c;
    dim3 grd((N + BN - 1) / BN, (M + BM - 1) / BM);
    linear_rb<true><<<grd, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

CPP_SRC = "torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_epilogue_fusion_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['linear_relu'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self, in_features: int = 128, out_features: int = 2048) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().linear_relu(x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous())
