import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void add_bias_4d_kernel(torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> x,
                                   const torch::PackedTensorAccessor32<float, 1, torch::RestrictPtrTraits> bias,
                                   torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> y) {
    const int n = blockIdx.z;
    const int c = blockIdx.y;
    const int hw = blockIdx.x * blockDim.x + threadIdx.x;
    const int W = x.size(3);
    if (hw < x.size(2) * W) {
        const int h = hw / W, w = hw % W;
        y[n][c][h][w] = x[n][c][h][w] + bias[c];
    }
}

torch::Tensor add_bias(torch::Tensor x, torch::Tensor bias) {
    auto y = torch::empty_like(x);
    const int HW = x.size(2) * x.size(3);
    dim3 grid((HW + 255) / 256, x.size(1), x.size(0));
    add_bias_4d_kernel<<<grid, 256>>>(x.packed_accessor32<float, 4, torch::RestrictPtrTraits>(),
                                      bias.packed_accessor32<float, 1, torch::RestrictPtrTraits>(),
                                      y.packed_accessor32<float, 4, torch::RestrictPtrTraits>());
    return y;
}
"""
ext = load_inline(name="bias4d", cpp_sources="torch::Tensor add_bias(torch::Tensor x, torch::Tensor bias);",
                  cuda_sources=cuda_src, functions=["add_bias"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(c))

    def forward(self, x):
        return ext.add_bias(x, self.bias)
