"""fp32 GEMM, C = A @ B, M = N = K = 2048 (17.2 GFLOP)."""

import torch
import torch.nn as nn

M = 2048
N = 2048
K = 2048


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs() -> list:
    return []
