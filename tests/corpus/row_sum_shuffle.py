import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__inline__ __device__ float warp_reduce_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    const float* row = x + (long)blockIdx.x * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += row[j];
    __shared__ float warp_sums[32];
    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    s = warp_reduce_sum(s);
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = (lane < blockDim.x / 32) ? warp_sums[lane] : 0.0f;
        s = warp_reduce_sum(s);
        if (lane == 0) out[blockIdx.x] = s;
    }
}

torch::Tensor row_sum(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({rows, 1}, x.options());
    row_sum_kernel<<<rows, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), cols);
    return out;
}
"""

ext = load_inline(name="row_sum_shfl", cpp_sources="torch::Tensor row_sum(torch::Tensor x);", cuda_sources=src,
                  functions=["row_sum"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return ext.row_sum(x)
