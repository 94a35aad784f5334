"""fp32 GEMM, C = A @ B, M = N = 4096, K = 8192 (275 GFLOP), checked in true fp32 (TF32 off).

The shape of KernelBench level 1 #1 with a long K: at K = 8192 plain TF32 inputs (10-bit mantissa) carry a
relative error per product of about 5e-4, which the strict protocol (atol = rtol = 1e-4) does not admit."""

import torch
import torch.nn as nn

M = 4096
N = 4096
K = 8192


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs() -> list:
    return []
