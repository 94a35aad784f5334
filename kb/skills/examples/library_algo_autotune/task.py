"""Linear, then y * s + y, in fp32 (checked in true fp32): x 16384 x 4096, W 4096 x 4096, s = 0.5.

The GEMM (550 GFLOP) is the forward's time; the scale and the residual fold into the weights and the bias
as (1 + s) W and (1 + s) b, so the forward is one library GEMM with a bias epilogue. Inputs in [0, 1)."""

import torch
import torch.nn as nn

batch_size = 16384
in_features = 4096
out_features = 4096
scaling_factor = 0.5


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling_factor: float) -> None:
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.matmul(x)
        return y * self.scaling_factor + y


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(batch_size, in_features)]


def get_init_inputs() -> list:
    return [in_features, out_features, scaling_factor]
