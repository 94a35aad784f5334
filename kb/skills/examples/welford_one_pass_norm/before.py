"""welford_one_pass_norm, before: a block per row reads the row three times: a pass for the mean, a
second pass for sum((x - mean)^2) (the numerically safe two-pass variance), and a third to
normalise. Each statistic also needs its own shared-memory reduction."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__device__ float block_sum(float v, float* sm) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();                           // sm may still be read by a previous call
    if (lane == 0) sm[warp] = v;
    __syncthreads();
    v = threadIdx.x < (blockDim.x >> 5) ? sm[threadIdx.x] : 0.0f;
    if (warp == 0) {
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) sm[0] = v;
    }
    __syncthreads();
    return sm[0];
}

__global__ void ln_three_pass(const float* __restrict__ x, float* __restrict__ y, long cols, float eps) {
    __shared__ float sm[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float s = 0.0f;
    for (long c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    float mean = block_sum(s, sm) / (float)cols;
    float q = 0.0f;
    for (long c = threadIdx.x; c < cols; c += blockDim.x) { float d = xr[c] - mean; q += d * d; }
    float var = block_sum(q, sm) / (float)cols;
    float rstd = 1.0f / sqrtf(var + eps);
    for (long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * rstd;
}

torch::Tensor layernorm(torch::Tensor x, double eps) {
    auto y = torch::empty_like(x);
    long rows = x.size(0), cols = x.size(1);
    if (rows > 0) ln_three_pass<<<(unsigned)rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

CPP_SRC = "torch::Tensor layernorm(torch::Tensor x, double eps);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_welford_one_pass_norm_before",
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
