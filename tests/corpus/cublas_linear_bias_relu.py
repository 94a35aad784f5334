import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        float v = y[idx] + bias[idx % cols];
        y[idx] = fmaxf(v, 0.0f);
    }
}

torch::Tensor linear_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    // GEMM through cuBLAS (at::matmul), epilogue in a custom kernel
    auto y = at::matmul(x, weight.t()).contiguous();
    int rows = y.size(0), cols = y.size(1);
    int total = rows * cols;
    bias_relu_kernel<<<(total + 255) / 256, 256>>>(y.data_ptr<float>(), bias.data_ptr<float>(), rows, cols);
    return y;
}
"""

ext = load_inline(name="linear_bias_relu",
                  cpp_sources="torch::Tensor linear_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
                  cuda_sources=source, functions=["linear_bias_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        return ext.linear_bias_relu(x, self.weight, self.bias)
