"""Cumulative sum along dim 1, fp32 (a test task of issue 31, not a KB example)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.rand(128, 65536)]


def get_init_inputs():
    return [1]
