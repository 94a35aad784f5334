"""y = relu(1.7 x + 0.3) ** 2 on 2**26 fp32 values: four elementwise ops, four kernels in eager mode."""

import torch
import torch.nn as nn

N = 1 << 26


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x * 1.7
        t = t + 0.3
        t = torch.relu(t)
        return t * t


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(N)]


def get_init_inputs() -> list:
    return []
