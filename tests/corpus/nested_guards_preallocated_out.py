import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void add_rowvec_kernel(const float* __restrict__ x, const float* __restrict__ v, float* __restrict__ out,
                                  int rows, int cols) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        if (col < cols) {
            out[row * cols + col] = x[row * cols + col] + v[col];
        }
    }
}

void add_rowvec(torch::Tensor x, torch::Tensor v, torch::Tensor out) {
    int rows = x.size(0), cols = x.size(1);
    dim3 block(32, 8), grid((cols + 31) / 32, (rows + 7) / 8);
    add_rowvec_kernel<<<grid, block>>>(x.data_ptr<float>(), v.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
}
"""
ext = load_inline(name="add_rowvec", cpp_sources="void add_rowvec(torch::Tensor x, torch::Tensor v, torch::Tensor out);",
                  cuda_sources=src, functions=["add_rowvec"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.v = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        out = torch.empty_like(x)
        ext.add_rowvec(x, self.v, out)
        return out
