"""Blind-set kernel bl10_rmsnorm_warp_row: a first CUDA version of the task (RMSNorm with a weight; one warp per row, shuffle reduction, scalar loads)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void rmsnorm_warp_kernel(const float* x, const float* w, float* y, int rows, int cols) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= rows) return;
    const float* row = x + (long)warp * cols;
    float ss = 0.f;
    for (int c = lane; c < cols; c += 32) ss += row[c] * row[c];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, o);
    float inv = rsqrtf(ss / cols + 1e-6f);
    float* out = y + (long)warp * cols;
    for (int c = lane; c < cols; c += 32) out[c] = row[c] * inv * w[c];
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    int threads = 128;
    int blocks = (rows * 32 + threads - 1) / threads;
    rmsnorm_warp_kernel<<<blocks, threads>>>(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = """
torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w);
"""

_ext = load_inline(
    name="blind_bl10_rmsnorm_warp_row",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['rmsnorm'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x, w):
        return _ext.rmsnorm(x.contiguous(), w.contiguous())
