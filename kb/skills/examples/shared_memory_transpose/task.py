"""Materialised transpose of an 8192 x 8192 fp32 matrix (256 MB in, 256 MB out)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


ROWS, COLS = 8192, 8192


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
