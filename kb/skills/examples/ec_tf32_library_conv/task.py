"""3x3 convolution (64 -> 128 channels, 32 x 64 x 64 x 64 input, fp32), scaled by 2 and LeakyReLU: a
KernelBench level-2 shaped forward whose time is the cuDNN convolution (19.3 GFLOP). Inputs from torch.rand
(positive, as KernelBench draws them: the worst case for the summation error of a compensated split)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float, negative_slope: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = scale
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(self.conv(x) * self.scale, self.negative_slope)


batch_size, in_channels, out_channels, height, width, kernel_size = 32, 64, 128, 64, 64, 3
scale, negative_slope = 2.0, 0.1


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale, negative_slope]
