"""C = A @ B, fp32, 2048 x 2048 x 2048 (a test task of issue 31, not a KB example)."""

import torch
import torch.nn as nn

M, K, N = 2048, 2048, 2048


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
