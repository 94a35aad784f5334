"""A first candidate for task.py: cuDNN in true fp32, then one CUDA kernel for tanh, scale and bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__global__ void tanh_scale_bias(float* __restrict__ y, const float* __restrict__ conv_bias,
                                const float* __restrict__ bias, float scale, long long n, int hw, int channels) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int c = (int)((i / hw) % channels);
    y[i] = tanhf(y[i] + conv_bias[c]) * scale + bias[c];
}

torch::Tensor tail(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double scale) {
    long long n = y.numel();
    int hw = (int)(y.size(2) * y.size(3));
    tanh_scale_bias<<<(unsigned)((n + 255) / 256), 256>>>(y.data_ptr<float>(), conv_bias.data_ptr<float>(),
                                                          bias.data_ptr<float>(), (float)scale, n, hw, (int)y.size(1));
    return y;
}
"""

CPP_SRC = "torch::Tensor tail(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double scale);"

_ext = load_inline(name="conv_heldout_tail", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["tail"],
                   extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scaling_factor: float, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scaling_factor = scaling_factor
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=False):
            y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding)
        return _ext.tail(y, self.conv.bias, self.bias.view(-1), self.scaling_factor)
