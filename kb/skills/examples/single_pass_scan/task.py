"""Inclusive prefix sum along rows: 32 rows x 2M fp32 (256 MB), torch.cumsum(x, dim=1)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


ROWS, COLS = 32, 2 * 1024 * 1024


def get_inputs():
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return []
