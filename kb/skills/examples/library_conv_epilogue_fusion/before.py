"""Before: cuDNN in true fp32 (TF32 off in the call's own scope) with the bias, then the tail as PyTorch ops:
GroupNorm (a statistics pass and an apply pass), the multiply and the clamp, each reading and writing the
134 MB output again."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int, scale: float,
                 clamp_min: float, clamp_max: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.scale = scale
        self.clamp_min, self.clamp_max = clamp_min, clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=False):
            y = F.conv2d(x, self.conv.weight, self.conv.bias, self.conv.stride, self.conv.padding)
        gn = self.group_norm
        y = F.group_norm(y, gn.num_groups, gn.weight, gn.bias, gn.eps)
        return torch.clamp(y * self.scale, self.clamp_min, self.clamp_max)
