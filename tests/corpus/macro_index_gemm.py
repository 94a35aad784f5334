import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#define IDX(i, j, ld) ((i) * (ld) + (j))
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define TS 32

__global__ void sgemm_smem(int M, int N, int K, const float* A, const float* B, float* C) {
    const int cRow = blockIdx.x, cCol = blockIdx.y;
    const int tRow = threadIdx.x / TS, tCol = threadIdx.x % TS;
    __shared__ float sA[TS * TS];
    __shared__ float sB[TS * TS];
    A += cRow * TS * K;
    B += cCol * TS;
    C += cRow * TS * N + cCol * TS;
    float tmp = 0.0;
    for (int bk = 0; bk < K; bk += TS) {
        sA[IDX(tRow, tCol, TS)] = A[IDX(tRow, tCol, K)];
        sB[IDX(tRow, tCol, TS)] = B[IDX(tRow, tCol, N)];
        __syncthreads();
        A += TS;
        B += TS * N;
        for (int d = 0; d < TS; ++d) tmp += sA[IDX(tRow, d, TS)] * sB[IDX(d, tCol, TS)];
        __syncthreads();
    }
    C[IDX(tRow, tCol, N)] = tmp;
}

torch::Tensor mm(torch::Tensor A, torch::Tensor B) {
    int M = A.size(0), K = A.size(1), N = B.size(1);
    TORCH_CHECK(M % TS == 0 && N % TS == 0 && K % TS == 0);
    auto C = torch::empty({M, N}, A.options());
    sgemm_smem<<<dim3(CEIL_DIV(M, TS), CEIL_DIV(N, TS)), TS * TS>>>(M, N, K, A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>());
    return C;
}
"""
ext = load_inline(name="sgemm_smem", cpp_sources="torch::Tensor mm(torch::Tensor A, torch::Tensor B);", cuda_sources=src,
                  functions=["mm"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.mm(A, B)
