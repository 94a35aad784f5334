"""3x3 convolution (64 -> 128 channels, 32 x 64 x 64 x 64 input, fp32), GroupNorm (8 groups), scaling and a
clamp: the KernelBench level-2 pattern of a library convolution followed by a normalisation tail. Eager
PyTorch runs the tail as four more passes over the 134 MB output (GroupNorm's statistics and its apply, the
multiply, the clamp)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int, scale: float,
                 clamp_min: float, clamp_max: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.scale = scale
        self.clamp_min, self.clamp_max = clamp_min, clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.group_norm(self.conv(x))
        return torch.clamp(x * self.scale, self.clamp_min, self.clamp_max)


batch_size, in_channels, out_channels, height, width, kernel_size = 32, 64, 128, 64, 64, 3
num_groups, scale, clamp_min, clamp_max = 8, 1.5, -1.0, 1.0


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups, scale, clamp_min, clamp_max]
