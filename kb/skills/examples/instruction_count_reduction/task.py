"""Per-channel affine on an NCHW tensor: y = x * scale[c] + bias[c]; 64x64x128x128 fp32 (256 MB)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)


N, C, H, W = 64, 64, 128, 128


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C]
