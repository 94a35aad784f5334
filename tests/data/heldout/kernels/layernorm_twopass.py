"""Held-out: LayerNorm over the last dimension (8192 rows x 4096 fp32, affine), one block per row:
pass 1 mean, pass 2 variance, pass 3 normalise, each statistic through a shared-memory tree."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#define THREADS 256

__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                 int cols, float eps) {
    __shared__ float buf[THREADS];
    const float* xr = x + (long)blockIdx.x * cols;
    float* yr = y + (long)blockIdx.x * cols;
    int tid = threadIdx.x;

    float s = 0.0f;
    for (int j = tid; j < cols; j += THREADS) s += xr[j];
    buf[tid] = s;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (tid < k) buf[tid] += buf[tid + k];
        __syncthreads();
    }
    float mean = buf[0] / cols;
    __syncthreads();

    float v = 0.0f;
    for (int j = tid; j < cols; j += THREADS) {
        float d = xr[j] - mean;
        v += d * d;
    }
    buf[tid] = v;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (tid < k) buf[tid] += buf[tid + k];
        __syncthreads();
    }
    float rstd = rsqrtf(buf[0] / cols + eps);

    for (int j = tid; j < cols; j += THREADS) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
}

torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    layernorm_kernel<<<rows, THREADS>>>(x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                        y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps);"

ext = load_inline(name="heldout_layernorm_twopass", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["layernorm_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.layernorm_cuda(x.contiguous(), self.weight, self.bias, self.eps)
