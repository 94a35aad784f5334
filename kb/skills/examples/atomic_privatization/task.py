"""256-bin histogram of 2**26 uniform fp32 values in [0, 1) (torch.histc)."""

import torch
import torch.nn as nn

N = 1 << 26


class Model(nn.Module):
    def __init__(self, bins: int = 256, lo: float = 0.0, hi: float = 1.0) -> None:
        super().__init__()
        self.bins, self.lo, self.hi = bins, lo, hi

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.histc(x, bins=self.bins, min=self.lo, max=self.hi)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(N)]


def get_init_inputs() -> list:
    return [256, 0.0, 1.0]
