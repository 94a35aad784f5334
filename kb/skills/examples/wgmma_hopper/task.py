"""fp16 linear without bias, y = x @ w^T, M = N = K = 4096 (137 GFLOP), fp16 in and out."""

import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, w.t())


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K).half(), torch.randn(N, K).half()]


def get_init_inputs() -> list:
    return []
