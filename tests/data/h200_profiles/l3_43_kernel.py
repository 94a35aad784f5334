# Plain first kernel for causal self-attention with input and output projections: a 16x16 shared-tile
# GEMM for both projections, a thread per score (causal mask applied), a row softmax, and a thread per
# output element for P @ V. The head split and merge are torch copies.
import math

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

// scores[bh, i, j] = scale * q[bh, i, :] . k[bh, j, :] for j <= i, -inf above the diagonal
extern "C" __global__ void attn_scores(const float* __restrict__ q, const float* __restrict__ k,
                                       float* __restrict__ s, int T, int D, float scale) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    long long bh = blockIdx.z;
    if (i >= T || j >= T) return;
    float acc = 0.f;
    if (j <= i) {
        const float* qi = q + (bh * T + i) * D;
        const float* kj = k + (bh * T + j) * D;
        for (int d = 0; d < D; ++d) acc += qi[d] * kj[d];
        acc *= scale;
    } else {
        acc = -INFINITY;
    }
    s[(bh * T + i) * T + j] = acc;
}

// one block of 128 threads per score row, in place
extern "C" __global__ void softmax_rows(float* __restrict__ s, int T) {
    __shared__ float sh[128];
    float* r = s + (long long)blockIdx.x * T;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < T; j += blockDim.x) m = fmaxf(m, r[j]);
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + o]);
        __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    float t = 0.f;
    for (int j = threadIdx.x; j < T; j += blockDim.x) t += expf(r[j] - m);
    sh[threadIdx.x] = t;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    float inv = 1.f / sh[0];
    for (int j = threadIdx.x; j < T; j += blockDim.x) r[j] = expf(r[j] - m) * inv;
}

// y[bh, i, d] = sum_j p[bh, i, j] * v[bh, j, d]
extern "C" __global__ void attn_av(const float* __restrict__ p, const float* __restrict__ v,
                                   float* __restrict__ y, int T, int D) {
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    long long bh = blockIdx.z;
    if (i >= T || d >= D) return;
    const float* pi = p + (bh * T + i) * T;
    const float* vb = v + bh * T * D;
    float acc = 0.f;
    for (int j = 0; j < T; ++j) acc += pi[j] * vb[(long long)j * D + d];
    y[(bh * T + i) * D + d] = acc;
}
"""
_mod = CudaModule(SRC, name="l3_43_plain")
_linear = _mod.kernel("linear_bias", "ptr, ptr, ptr, ptr, i32, i32, i32")
_scores = _mod.kernel("attn_scores", "ptr, ptr, ptr, i32, i32, f32")
_softmax = _mod.kernel("softmax_rows", "ptr, i32")
_av = _mod.kernel("attn_av", "ptr, ptr, ptr, i32, i32")


class ModelNew(torch.nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        self.c_attn = torch.nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = torch.nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd

    def _linear(self, x2d, layer):
        m, k = x2d.shape
        n = layer.weight.shape[0]
        out = torch.empty(m, n, device=x2d.device, dtype=x2d.dtype)
        _linear(grid=((n + 15) // 16, (m + 15) // 16), block=(16, 16),
                args=(x2d, layer.weight, layer.bias, out, m, n, k))
        return out

    def forward(self, x):
        b, t, c = x.shape
        nh, hs = self.n_head, c // self.n_head
        qkv = self._linear(x.contiguous().view(b * t, c), self.c_attn).view(b, t, 3 * c)
        q, k, v = (part.view(b, t, nh, hs).transpose(1, 2).contiguous() for part in qkv.split(c, dim=2))
        scores = torch.empty(b * nh, t, t, device=x.device, dtype=x.dtype)
        _scores(grid=((t + 15) // 16, (t + 15) // 16, b * nh), block=(16, 16),
                args=(q, k, scores, t, hs, 1.0 / math.sqrt(hs)))
        _softmax(grid=b * nh * t, block=128, args=(scores, t))
        y = torch.empty(b * nh, t, hs, device=x.device, dtype=x.dtype)
        _av(grid=((hs + 31) // 32, (t + 7) // 8, b * nh), block=(32, 8), args=(scores, v, y, t, hs))
        y = y.view(b, nh, t, hs).transpose(1, 2).contiguous().view(b * t, c)
        return self._linear(y, self.c_proj).view(b, t, c)
