"""Blind-set kernel bl09_layernorm_two_pass: a first CUDA version of the task (LayerNorm over the last dim (no affine); block per row, mean pass then variance pass then write)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__device__ float block_sum(float v, float* buf) {
    int t = threadIdx.x;
    buf[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

__global__ void layernorm_kernel(const float* x, float* y, int cols, float eps) {
    __shared__ float buf[256];
    const float* row = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    float mean = block_sum(s, buf) / cols;
    float v = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = row[c] - mean;
        v += d * d;
    }
    float var = block_sum(v, buf) / cols;
    float inv = 1.f / sqrtf(var + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * inv;
}

torch::Tensor layernorm(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    layernorm_kernel<<<rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols, 1e-5f);
    return y;
}
"""

CPP_SRC = """
torch::Tensor layernorm(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl09_layernorm_two_pass",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['layernorm'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.hidden = hidden

    def forward(self, x):
        return _ext.layernorm(x.contiguous())
