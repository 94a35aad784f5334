import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void scale_bias_kernel(const float* x, const float* bias, float* y, float s, int C, int inner, int total) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = x[i] * s + bias[(i / inner) % C];
}

torch::Tensor scale_bias(torch::Tensor x, torch::Tensor bias, double s) {
    auto y = torch::empty_like(x);
    int total = x.numel(), C = x.size(1), inner = x.numel() / (x.size(0) * x.size(1));
    scale_bias_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                                                    (float)s, C, inner, total);
    return y;
}
"""
ext = load_inline(name="scale_bias", cpp_sources="torch::Tensor scale_bias(torch::Tensor x, torch::Tensor bias, double s);",
                  cuda_sources=src, functions=["scale_bias"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, channels, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channels))
        self.scale = scale

    def forward(self, x):
        return F.relu(ext.scale_bias(x, self.bias, self.scale))
