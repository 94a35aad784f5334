"""Column normalisation, y = x / x.sum(dim=0), on an 8192 x 8192 fp32 matrix (256 MB)."""

import torch
import torch.nn as nn

ROWS = 8192
COLS = 8192


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.sum(dim=0, keepdim=True)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(ROWS, COLS)]


def get_init_inputs() -> list:
    return []
