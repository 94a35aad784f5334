import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

// Debug helper kept from an earlier attempt; not launched by the forward.
__global__ void block_sum_debug(const float* x, float* out, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

__global__ void mish_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v * tanhf(log1pf(expf(v)));
    }
}

torch::Tensor mish(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    mish_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="mish_dbg", cpp_sources="torch::Tensor mish(torch::Tensor x);", cuda_sources=src, functions=["mish"],
                  verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.mish(x)
