"""Column sums of a 16384 x 4096 fp32 matrix (256 MB read, 16 KB written)."""

import torch
import torch.nn as nn

ROWS = 16384
COLS = 4096


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=0)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(ROWS, COLS)]


def get_init_inputs() -> list:
    return []
