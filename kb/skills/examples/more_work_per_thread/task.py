"""Fused multiply-add of three tensors, y = a * b + c, on 2**26 fp32 values each (1 GB of traffic)."""

import torch
import torch.nn as nn

N = 1 << 26


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return a * b + c


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(N), torch.randn(N), torch.randn(N)]


def get_init_inputs() -> list:
    return []
