"""Linear + ReLU in fp32, checked in true fp32 (TF32 off): y = relu(x @ W^T + b), x 4096 x 8192, W 4096 x 8192.

The GEMM (275 GFLOP) takes nearly all the time. Inputs are zero-mean (torch.randn) and K = 8192, the case
where plain TF32 inputs fail atol = rtol = 1e-4 and a careless error-compensated split does too."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 8192
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, in_features)]


def get_init_inputs() -> list:
    return [in_features, out_features]
