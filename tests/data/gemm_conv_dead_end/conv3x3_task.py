"""3x3 convolution with bias, stride 1, padding 1, followed by ReLU: 16 x 64 x 64 x 64 -> 128 channels, fp32.
As a GEMM: M = 16 * 64 * 64 pixels, N = 128, K = 64 * 9 (9.7 GFLOP)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(16, 64, 64, 64)]


def get_init_inputs():
    return [64, 128]
