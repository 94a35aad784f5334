# Loophole: the inner GEMM dimension K = 1024 is baked into the kernel (M and N come from the tensors).
# Correct on the shipped shapes, caught when the second shape set varies K.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
#define T 32
#define KFIX 1024
extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N) {
    const int K = KFIX;
    __shared__ float As[T][T];
    __shared__ float Bs[T][T + 1];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[row * K + k0 + threadIdx.x] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + col] : 0.f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
"""
_mm = CudaModule(SRC, name="mm_hc_k").kernel("mm", "ptr, ptr, ptr, i32, i32")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        M = a.shape[0]
        N = b.shape[1]
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        _mm(grid=((N + 31) // 32, (M + 31) // 32), block=(32, 32), args=(a, b, c, M, N))
        return c
