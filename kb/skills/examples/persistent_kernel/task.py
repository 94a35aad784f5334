"""A 32 -> 32 linear map applied to 2M rows: y = x @ W + b; x is 2M x 32 fp32 (256 MB)."""

import torch
import torch.nn as nn

D = 32


class Model(nn.Module):
    def __init__(self, d: int = D):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.weight)


ROWS = 2 * 1024 * 1024


def get_inputs():
    return [torch.randn(ROWS, D)]


def get_init_inputs():
    return [D]
