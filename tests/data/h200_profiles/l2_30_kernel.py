# Plain first kernel for a Linear + GroupNorm + Hardtanh forward: a 16x16 shared-tile GEMM with the
# bias, then one block per (row, group) for the statistics, the affine map and the clamp.
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

// one block of 256 threads per (row, group)
extern "C" __global__ void group_norm_hardtanh(const float* __restrict__ x, const float* __restrict__ gamma,
                                               const float* __restrict__ beta, float* __restrict__ y,
                                               int C, int G, float eps, float lo, float hi) {
    __shared__ float s_sum[256];
    __shared__ float s_sq[256];
    int row = blockIdx.x / G, g = blockIdx.x % G, cg = C / G;
    const float* xr = x + (long long)row * C + (long long)g * cg;
    float* yr = y + (long long)row * C + (long long)g * cg;
    float a = 0.f, q = 0.f;
    for (int i = threadIdx.x; i < cg; i += blockDim.x) {
        float v = xr[i];
        a += v;
        q += v * v;
    }
    s_sum[threadIdx.x] = a;
    s_sq[threadIdx.x] = q;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            s_sum[threadIdx.x] += s_sum[threadIdx.x + s];
            s_sq[threadIdx.x] += s_sq[threadIdx.x + s];
        }
        __syncthreads();
    }
    float mean = s_sum[0] / cg;
    float var = s_sq[0] / cg - mean * mean;
    float inv = rsqrtf(var + eps);
    for (int i = threadIdx.x; i < cg; i += blockDim.x) {
        int c = g * cg + i;
        float v = (xr[i] - mean) * inv * gamma[c] + beta[c];
        yr[i] = fminf(fmaxf(v, lo), hi);
    }
}
"""
_mod = CudaModule(SRC, name="l2_30_plain")
_linear = _mod.kernel("linear_bias", "ptr, ptr, ptr, ptr, i32, i32, i32")
_norm = _mod.kernel("group_norm_hardtanh", "ptr, ptr, ptr, ptr, i32, i32, f32, f32, f32")


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features, num_groups, hardtanh_min, hardtanh_max):
        super().__init__()
        self.gemm = torch.nn.Linear(in_features, out_features)
        self.group_norm = torch.nn.GroupNorm(num_groups, out_features)
        self.lo, self.hi = float(hardtanh_min), float(hardtanh_max)

    def forward(self, x):
        x = x.contiguous()
        m, k = x.shape
        n = self.gemm.weight.shape[0]
        h = torch.empty(m, n, device=x.device, dtype=x.dtype)
        _linear(grid=((n + 15) // 16, (m + 15) // 16), block=(16, 16),
                args=(x, self.gemm.weight, self.gemm.bias, h, m, n, k))
        out = torch.empty_like(h)
        groups = self.group_norm.num_groups
        _norm(grid=m * groups, block=256,
              args=(h, self.group_norm.weight, self.group_norm.bias, out, n, groups,
                    float(self.group_norm.eps), self.lo, self.hi))
        return out
