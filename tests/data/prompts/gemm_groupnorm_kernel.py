"""A first, plain kernel pair for the Linear + GroupNorm + Hardtanh task: one thread per output for the GEMM
(bias added), then one block per (row, group) that normalises its channels with rsqrtf and clamps them."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__global__ void linear_kernel(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ b, float* __restrict__ y, int m, int n, int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) acc += x[row * k + i] * w[col * k + i];
    y[row * n + col] = acc + b[col];
}

__global__ void groupnorm_hardtanh_kernel(float* __restrict__ y, const float* __restrict__ gamma,
                                          const float* __restrict__ beta, int n, int group_size,
                                          float eps, float lo, float hi) {
    int row = blockIdx.x, group = blockIdx.y;
    float* g = y + (long)row * n + group * group_size;
    __shared__ float s_sum[256], s_sq[256];
    float sum = 0.0f, sq = 0.0f;
    for (int c = threadIdx.x; c < group_size; c += blockDim.x) { float v = g[c]; sum += v; sq += v * v; }
    s_sum[threadIdx.x] = sum; s_sq[threadIdx.x] = sq;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) { s_sum[threadIdx.x] += s_sum[threadIdx.x + s]; s_sq[threadIdx.x] += s_sq[threadIdx.x + s]; }
        __syncthreads();
    }
    float mean = s_sum[0] / group_size;
    float inv = rsqrtf(s_sq[0] / group_size - mean * mean + eps);
    for (int c = threadIdx.x; c < group_size; c += blockDim.x) {
        int ch = group * group_size + c;
        float v = (g[c] - mean) * inv * gamma[ch] + beta[ch];
        g[c] = fminf(fmaxf(v, lo), hi);
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma,
                      torch::Tensor beta, int64_t groups) {
    int m = x.size(0), k = x.size(1), n = w.size(0);
    auto y = torch::empty({m, n}, x.options());
    dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
    linear_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                   y.data_ptr<float>(), m, n, k);
    groupnorm_hardtanh_kernel<<<dim3(m, groups), 256>>>(y.data_ptr<float>(), gamma.data_ptr<float>(),
                                                        beta.data_ptr<float>(), n, n / groups, 1e-5f, -2.0f, 2.0f);
    return y;
}
"""

cpp_source = ("torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma, "
              "torch::Tensor beta, int64_t groups);")

ext = load_inline(name="ks_prompts_gemm_groupnorm", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features: int = 1024, out_features: int = 512, groups: int = 16):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(groups, out_features)
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.forward(x.contiguous(), self.linear.weight, self.linear.bias, self.norm.weight,
                           self.norm.bias, self.groups)
