"""A square-ish fp32 GEMM whose operands together exceed L2: (2048 x 4096) @ (4096 x 2048).

A and B are 32 MB each (64 MB together, more than the H200's 60 MB L2), so the order in which tiles run
decides how often a panel of A or B is fetched from DRAM again.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M, K, N = 2048, 4096, 2048


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
