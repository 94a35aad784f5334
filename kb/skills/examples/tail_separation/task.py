"""SiLU over a 1-D tensor whose length is not a multiple of 4: 64M + 3 fp32 (256 MB)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


N = 64 * 1024 * 1024 + 3


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
