"""KernelBench-format task: ReLU over a large fp32 tensor (pure streaming, bandwidth bound)."""

import torch
import torch.nn as nn

ROWS, COLS = 8192, 16384


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(ROWS, COLS) - 0.5]


def get_init_inputs():
    return []
