"""Row sums of a 65536 x 2048 fp32 matrix (512 MB read)."""

import torch
import torch.nn as nn

ROWS = 65536
COLS = 2048


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(ROWS, COLS)]


def get_init_inputs() -> list:
    return []
