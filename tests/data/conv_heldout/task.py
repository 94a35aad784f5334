"""Held-out conv forward for the conv knowledge tests (written for them, not a KB example): a 5x5 convolution
48 -> 96 channels, tanh, a scale and a per-channel bias, fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scaling_factor: float, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scaling_factor = scaling_factor
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.conv(x))
        return x * self.scaling_factor + self.bias


batch_size, in_channels, out_channels, height, width, kernel_size = 16, 48, 96, 96, 96, 5
scaling_factor, bias_shape = 2.0, (out_channels, 1, 1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scaling_factor, bias_shape]
