import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#define BLOCK 256

__global__ void sum_all_kernel(const float* __restrict__ x, float* __restrict__ result, long n) {
    __shared__ float sdata[BLOCK];
    int tid = threadIdx.x;
    float local = 0.0f;
    for (long i = (long)blockIdx.x * BLOCK + tid; i < n; i += (long)gridDim.x * BLOCK) {
        local += x[i];
    }
    sdata[tid] = local;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(result, sdata[0]);
}

torch::Tensor sum_all(torch::Tensor x) {
    auto result = torch::zeros({1}, x.options());
    long n = x.numel();
    sum_all_kernel<<<528, BLOCK>>>(x.data_ptr<float>(), result.data_ptr<float>(), n);
    return result;
}
"""

ext = load_inline(name="sum_all_atomic", cpp_sources="torch::Tensor sum_all(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["sum_all"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.sum_all(x)
