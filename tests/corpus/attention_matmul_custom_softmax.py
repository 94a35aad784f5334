import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void scaled_softmax_kernel(float* __restrict__ s, int cols, float scale) {
    extern __shared__ float red[];
    float* row = s + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j] * scale);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float e = exp2f((row[j] * scale - m) * 1.4426950408889634f);
        row[j] = e;
        sum += e;
    }
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float inv = 1.f / red[0];
    for (int j = threadIdx.x; j < cols; j += blockDim.x) row[j] *= inv;
}

torch::Tensor scaled_softmax_(torch::Tensor s, double scale) {
    int cols = s.size(-1);
    int rows = s.numel() / cols;
    scaled_softmax_kernel<<<rows, 256, 256 * sizeof(float)>>>(s.data_ptr<float>(), cols, (float)scale);
    return s;
}
"""
ext = load_inline(name="scaled_softmax", cpp_sources="torch::Tensor scaled_softmax_(torch::Tensor s, double scale);",
                  cuda_sources=src, functions=["scaled_softmax_"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)).contiguous()
        p = ext.scaled_softmax_(scores, 1.0 / math.sqrt(q.size(-1)))
        return torch.matmul(p, v)
