import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void hardswish_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
    }
}

torch::Tensor hardswish(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    hardswish_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="hardswish", cpp_sources="torch::Tensor hardswish(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["hardswish"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        return ext.hardswish(x)
