"""A GEMM with a small output and a very long reduction: (256 x 65536) @ (65536 x 256), fp32.

A and B are 64 MB each; the output has only 16 tiles of 64 x 64, far fewer than the H200's 132 SMs.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M, K, N = 256, 65536, 256


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
