"""Held-out: RMSNorm over the last dimension (16384 rows x 4096 fp32, with weight), one block per row,
sum of squares through a shared-memory tree, then a scaling pass."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void rmsnorm_kernel(const float* x, const float* w, float* y, int cols, float eps) {
    extern __shared__ float partial[];
    const float* xr = x + (long)blockIdx.x * cols;
    float* yr = y + (long)blockIdx.x * cols;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = xr[j];
        ss += v * v;
    }
    partial[threadIdx.x] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    float scale = rsqrtf(partial[0] / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = xr[j] * scale * w[j];
}

torch::Tensor rmsnorm_cuda(torch::Tensor x, torch::Tensor w, double eps) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    int threads = 256;
    rmsnorm_kernel<<<rows, threads, threads * sizeof(float)>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                              y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_cuda(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="heldout_rmsnorm", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["rmsnorm_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rmsnorm_cuda(x.contiguous(), self.weight, self.eps)
