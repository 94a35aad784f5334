"""Linear layer followed by a sum over its outputs: y = (x W^T + b).sum(1, keepdim=True).

x is 16384 x 1024 fp32 (64 MB), W is 1024 x 1024. Summation is linear, so y = x (W^T 1) + sum(b):
the GEMM collapses to a matrix-vector product.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).sum(dim=1, keepdim=True)


BATCH, IN, OUT = 16384, 1024, 1024


def get_inputs():
    return [torch.randn(BATCH, IN)]


def get_init_inputs():
    return [IN, OUT]
