import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void group_stats_kernel(const float* __restrict__ x, float* __restrict__ mean, float* __restrict__ rstd,
                                   int group_size, float eps) {
    __shared__ float s1[256], s2[256];
    const float* xg = x + (size_t)blockIdx.x * group_size;
    float a = 0.f, b = 0.f;
    for (int i = threadIdx.x; i < group_size; i += blockDim.x) { float v = xg[i]; a += v; b += v * v; }
    s1[threadIdx.x] = a; s2[threadIdx.x] = b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) { s1[threadIdx.x] += s1[threadIdx.x + s]; s2[threadIdx.x] += s2[threadIdx.x + s]; }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float m = s1[0] / group_size;
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = rsqrtf(s2[0] / group_size - m * m + eps);
    }
}

__global__ void group_apply_kernel(const float* __restrict__ x, const float* __restrict__ mean, const float* __restrict__ rstd,
                                   const float* __restrict__ gamma, const float* __restrict__ beta, float* __restrict__ y,
                                   int C, int HW, int G, long total) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= total) return;
    int c = (i / HW) % C;
    long n = i / ((long)HW * C);
    int g = n * G + c / (C / G);
    y[i] = (x[i] - mean[g]) * rstd[g] * gamma[c] + beta[c];
}

torch::Tensor group_norm(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, int64_t G) {
    int N = x.size(0), C = x.size(1), HW = x.numel() / (N * C);
    auto mean = torch::empty({N * G}, x.options()), rstd = torch::empty({N * G}, x.options());
    auto y = torch::empty_like(x);
    group_stats_kernel<<<N * G, 256>>>(x.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(), C / G * HW, 1e-5f);
    long total = x.numel();
    group_apply_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
        gamma.data_ptr<float>(), beta.data_ptr<float>(), y.data_ptr<float>(), C, HW, G, total);
    return y;
}
"""
ext = load_inline(name="groupnorm2", cpp_sources="torch::Tensor group_norm(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, int64_t G);",
                  cuda_sources=src, functions=["group_norm"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.G = num_groups
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def forward(self, x):
        return ext.group_norm(x, self.weight, self.bias, self.G)
