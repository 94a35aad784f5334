# Plain first kernel for a Linear + GELU + Softmax forward: a 16x16 shared-tile GEMM with the bias,
# then one block per row that applies the exact GELU and a three-pass softmax.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
#define TILE 16
extern "C" __global__ void linear_bias(const float* __restrict__ x, const float* __restrict__ w,
                                       const float* __restrict__ b, float* __restrict__ y,
                                       int M, int N, int K) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    int wrow = blockIdx.x * TILE + threadIdx.y;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int kk = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && kk < K) ? x[(long long)row * K + kk] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (wrow < N && kk < K) ? w[(long long)wrow * K + kk] : 0.f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
        __syncthreads();
    }
    if (row < M && col < N) y[(long long)row * N + col] = acc + b[col];
}

__device__ float gelu_exact(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678f)); }

__device__ float block_sum_or_max(float v, bool is_max, float* sh) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffff, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    v = (threadIdx.x < nw) ? sh[threadIdx.x] : (is_max ? -INFINITY : 0.f);
    if (wid == 0) {
        for (int o = 16; o > 0; o >>= 1) {
            float u = __shfl_xor_sync(0xffffffff, v, o);
            v = is_max ? fmaxf(v, u) : v + u;
        }
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

// one block per row
extern "C" __global__ void gelu_softmax(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float sh[32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, gelu_exact(xr[i]));
    m = block_sum_or_max(m, true, sh);
    float s = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) s += expf(gelu_exact(xr[i]) - m);
    s = block_sum_or_max(s, false, sh);
    float inv = 1.f / s;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = expf(gelu_exact(xr[i]) - m) * inv;
}
"""
_mod = CudaModule(SRC, name="l2_99_plain")
_linear = _mod.kernel("linear_bias", "ptr, ptr, ptr, ptr, i32, i32, i32")
_gelu_softmax = _mod.kernel("gelu_softmax", "ptr, ptr, i32")


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        m, k = x.shape
        n = self.linear.weight.shape[0]
        h = torch.empty(m, n, device=x.device, dtype=x.dtype)
        _linear(grid=((n + 15) // 16, (m + 15) // 16), block=(16, 16),
                args=(x, self.linear.weight, self.linear.bias, h, m, n, k))
        out = torch.empty_like(h)
        _gelu_softmax(grid=m, block=1024, args=(h, out, n))
        return out
