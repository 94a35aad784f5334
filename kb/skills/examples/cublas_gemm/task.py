"""relu(A @ B) * 0.5 in fp32, M = N = K = 2048: a GEMM with a small elementwise tail."""

import torch
import torch.nn as nn

M = 2048
N = 2048
K = 2048


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.matmul(a, b)) * 0.5


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs() -> list:
    return []
