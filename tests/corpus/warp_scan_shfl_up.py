import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

// Inclusive scan of rows of length 32*k: warp scans with __shfl_up_sync, carry across chunks.
__global__ void row_cumsum_warp(const float* __restrict__ x, float* __restrict__ y, int cols) {
    int row = blockIdx.x;
    int lane = threadIdx.x;
    float carry = 0.f;
    for (int base = 0; base < cols; base += 32) {
        int j = base + lane;
        float v = (j < cols) ? x[(long)row * cols + j] : 0.f;
        for (int off = 1; off < 32; off <<= 1) {
            float t = __shfl_up_sync(0xffffffff, v, off);
            if (lane >= off) v += t;
        }
        v += carry;
        if (j < cols) y[(long)row * cols + j] = v;
        carry = __shfl_sync(0xffffffff, v, 31);
    }
}

torch::Tensor cumsum(torch::Tensor x) {
    auto y = torch::empty_like(x);
    row_cumsum_warp<<<x.size(0), 32>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}
"""
ext = load_inline(name="warp_cumsum", cpp_sources="torch::Tensor cumsum(torch::Tensor x);", cuda_sources=cuda_src,
                  functions=["cumsum"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return ext.cumsum(x)
