"""A 16 x 16 linear map per row, y = x W^T, over 4M rows: x is 4M x 16 fp32 (256 MB)."""

import torch
import torch.nn as nn

D = 16


class Model(nn.Module):
    def __init__(self, d: int = D):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d) / d ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.t()


ROWS = 4 * 1024 * 1024


def get_inputs():
    return [torch.randn(ROWS, D)]


def get_init_inputs():
    return [D]
