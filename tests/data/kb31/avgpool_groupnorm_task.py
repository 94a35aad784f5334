"""GroupNorm then 2x2 average pooling, fp32 (a test task of issue 31, not a KB example)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(8, 64)
        self.pool = nn.AvgPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.norm(x))


def get_inputs():
    return [torch.rand(16, 64, 128, 128)]


def get_init_inputs():
    return []
