"""fp32 GEMM, C = A @ B, M = N = K = 4096 (137 GFLOP), checked in true fp32 (TF32 off); the shape of
KernelBench level 1 #1."""

import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs() -> list:
    return []
