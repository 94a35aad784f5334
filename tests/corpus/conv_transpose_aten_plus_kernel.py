import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void clamp_scale_kernel(float* __restrict__ y, float lo, float hi, float s, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fminf(fmaxf(y[i], lo), hi) * s;
}

torch::Tensor convt_clamp(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t stride, int64_t pad) {
    auto y = torch::conv_transpose2d(x, w, b, stride, pad);
    long n = y.numel();
    clamp_scale_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), 0.f, 1.f, 2.f, n);
    return y;
}
"""
ext = load_inline(name="convt_clamp", cpp_sources="torch::Tensor convt_clamp(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t stride, int64_t pad);",
                  cuda_sources=src, functions=["convt_clamp"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, cin, cout, k, stride, padding):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(cin, cout, k, stride=stride, padding=padding)
        self.stride, self.padding = stride, padding

    def forward(self, x):
        return ext.convt_clamp(x, self.conv_transpose.weight, self.conv_transpose.bias, self.stride, self.padding)
