"""KernelBench-format task: a plain fp32 matrix product C = A @ B (square, 2048)."""

import torch
import torch.nn as nn

M = N = K = 2048


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
