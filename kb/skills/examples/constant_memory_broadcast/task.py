"""Evaluate a degree-63 polynomial (Horner) at 32M points in [0, 1): 128 MB fp32 in and out.

Every element reads the same 64 coefficients: the classic warp-uniform read-only operand.
"""

import torch
import torch.nn as nn

DEGREE = 63


class Model(nn.Module):
    def __init__(self, degree: int = DEGREE):
        super().__init__()
        k = torch.arange(degree + 1, dtype=torch.float32)
        self.register_buffer("coeffs", (-1.0) ** k / (k + 1.0))   # log(1 + x) / x series

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.coeffs
        acc = torch.zeros_like(x) + c[-1]
        for i in range(c.numel() - 2, -1, -1):
            acc = acc * x + c[i]
        return acc


N = 32 * 1024 * 1024


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return [DEGREE]
