import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void softplus_kernel(const float* __restrict x, float* __restrict y, int64_t n, float beta) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t total_threads = (int64_t)gridDim.x * blockDim.x;
    for (; idx < n; idx += total_threads) {
        float v = x[idx] * beta;
        y[idx] = (v > 20.f ? v : log1pf(__expf(v))) / beta;
    }
}

torch::Tensor softplus(torch::Tensor x, double beta) {
    auto y = torch::empty_like(x);
    softplus_kernel<<<1024, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), (float)beta);
    return y;
}
"""
ext = load_inline(name="softplus_gs", cpp_sources="torch::Tensor softplus(torch::Tensor x, double beta);", cuda_sources=src,
                  functions=["softplus"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softplus(x, 1.0)
