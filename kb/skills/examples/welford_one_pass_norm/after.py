"""welford_one_pass_norm, after: mean and variance from ONE read of the row with Welford's update per
element (stable, unlike sum/sum-of-squares), per-thread states merged with Chan's parallel formula
through warp shuffles and one shared step, then the normalising pass: 2 reads of the row instead of
3."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
struct Wf { float n, mean, m2; };

__device__ __forceinline__ Wf wf_merge(Wf a, Wf b) {
    if (b.n == 0.0f) return a;
    if (a.n == 0.0f) return b;
    float n = a.n + b.n;
    float d = b.mean - a.mean;
    float f = b.n / n;
    Wf r;
    r.n = n;
    r.mean = a.mean + d * f;
    r.m2 = a.m2 + b.m2 + d * d * a.n * f;
    return r;
}

__device__ __forceinline__ Wf wf_warp(Wf w) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        Wf other;
        other.n = __shfl_xor_sync(0xffffffffu, w.n, o);
        other.mean = __shfl_xor_sync(0xffffffffu, w.mean, o);
        other.m2 = __shfl_xor_sync(0xffffffffu, w.m2, o);
        w = wf_merge(w, other);
    }
    return w;
}

__global__ void ln_welford(const float* __restrict__ x, float* __restrict__ y, long cols, float eps) {
    __shared__ float sn[32], smean[32], sm2[32];
    __shared__ float s_mean, s_rstd;
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    Wf w = {0.0f, 0.0f, 0.0f};
    for (long c = threadIdx.x; c < cols; c += blockDim.x) {   // one pass: Welford update
        float v = xr[c];
        w.n += 1.0f;
        float d = v - w.mean;
        w.mean += d / w.n;
        w.m2 += d * (v - w.mean);
    }
    w = wf_warp(w);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sn[warp] = w.n; smean[warp] = w.mean; sm2[warp] = w.m2; }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        Wf v = {0.0f, 0.0f, 0.0f};
        if (lane < nw) { v.n = sn[lane]; v.mean = smean[lane]; v.m2 = sm2[lane]; }
        v = wf_warp(v);
        if (lane == 0) { s_mean = v.mean; s_rstd = 1.0f / sqrtf(v.m2 / (float)cols + eps); }
    }
    __syncthreads();
    float mean = s_mean, rstd = s_rstd;
    for (long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * rstd;
}

torch::Tensor layernorm(torch::Tensor x, double eps) {
    auto y = torch::empty_like(x);
    long rows = x.size(0), cols = x.size(1);
    if (rows > 0) ln_welford<<<(unsigned)rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

CPP_SRC = "torch::Tensor layernorm(torch::Tensor x, double eps);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_welford_one_pass_norm_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['layernorm'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self, cols: int = 65536, eps: float = 1e-5) -> None:
        super().__init__()
        self.cols, self.eps = cols, eps
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous().view(-1, self.cols)
        return _ext().layernorm(x2, self.eps).view(x.shape)
