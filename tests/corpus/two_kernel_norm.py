import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void sumsq_kernel(const float* __restrict__ x, float* __restrict__ acc, long n) {
    __shared__ float buf[256];
    float v = 0.0f;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        v += x[i] * x[i];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(acc, buf[0]);
}

__global__ void scale_kernel(const float* __restrict__ x, const float* __restrict__ acc,
                             float* __restrict__ y, long n) {
    float inv = rsqrtf(acc[0] + 1e-12f);
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = x[i] * inv;
}

torch::Tensor frobenius_normalize(torch::Tensor x) {
    long n = x.numel();
    auto acc = torch::zeros({1}, x.options());
    auto y = torch::empty_like(x);
    sumsq_kernel<<<512, 256>>>(x.data_ptr<float>(), acc.data_ptr<float>(), n);
    scale_kernel<<<512, 256>>>(x.data_ptr<float>(), acc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="frob_norm", cpp_sources="torch::Tensor frobenius_normalize(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["frobenius_normalize"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.frobenius_normalize(x)
