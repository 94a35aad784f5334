"""KernelBench-format task: y = GELU(x @ W^T + b) + x, fp32, batch 4096, width 4096."""

import torch
import torch.nn as nn

BATCH, WIDTH = 4096, 4096


class Model(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x)) + x


def get_inputs():
    return [torch.rand(BATCH, WIDTH)]


def get_init_inputs():
    return [WIDTH]
