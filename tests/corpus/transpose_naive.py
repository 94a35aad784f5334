import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>

__global__ void transpose_kernel(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[c * rows + r] = in[r * cols + c];
    }
}

torch::Tensor transpose2d(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty({cols, rows}, x.options());
    dim3 block(32, 8);
    dim3 grid((cols + 31) / 32, (rows + 7) / 8);
    transpose_kernel<<<grid, block>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

ext = load_inline(name="transpose_naive", cpp_sources="torch::Tensor transpose2d(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["transpose2d"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.transpose2d(x)
