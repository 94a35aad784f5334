import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void row_l2_normalize_kernel(float* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x;
    __shared__ float part[128];
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) { float v = y[row * cols + j]; s += v * v; }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int st = blockDim.x / 2; st > 0; st >>= 1) {
        if (threadIdx.x < st) part[threadIdx.x] += part[threadIdx.x + st];
        __syncthreads();
    }
    float inv = rsqrtf(part[0] + 1e-12f);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) y[row * cols + j] *= inv;
}

torch::Tensor l2norm_rows_(torch::Tensor y) {
    row_l2_normalize_kernel<<<y.size(0), 128>>>(y.data_ptr<float>(), y.size(0), y.size(1));
    return y;
}
"""
ext = load_inline(name="l2rows", cpp_sources="torch::Tensor l2norm_rows_(torch::Tensor y);", cuda_sources=cuda_src,
                  functions=["l2norm_rows_"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W = nn.Parameter(torch.randn(d_in, d_out))

    def forward(self, x):
        y = torch.matmul(x, self.W)
        return ext.l2norm_rows_(y)
