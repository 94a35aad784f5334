"""KernelBench-format task: softmax over the last dimension of a (4096, 8192) fp32 matrix."""

import torch
import torch.nn as nn

ROWS, COLS = 4096, 8192


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return []
