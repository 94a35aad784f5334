"""Scale-shift-ReLU, y = relu(3x + 1), on 2**27 fp32 values (512 MB in, 512 MB out)."""

import torch
import torch.nn as nn

N = 1 << 27


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 3.0 + 1.0)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(N)]


def get_init_inputs() -> list:
    return []
