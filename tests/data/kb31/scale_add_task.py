"""y = 2 * x + z, fp32, 8192 x 8192 (a test task of issue 31, not a KB example)."""

import torch
import torch.nn as nn

ROWS, COLS = 8192, 8192


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return torch.add(torch.mul(x, 2.0), z)


def get_inputs():
    return [torch.rand(ROWS, COLS), torch.rand(ROWS, COLS)]


def get_init_inputs():
    return []
