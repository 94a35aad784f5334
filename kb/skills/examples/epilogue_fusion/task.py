"""Linear + bias + ReLU in fp32: relu(x @ W^T + b), x 16384 x 128, W 2048 x 128 (output 128 MB)."""

import torch
import torch.nn as nn

BATCH = 16384
IN_FEATURES = 128
OUT_FEATURES = 2048


class Model(nn.Module):
    def __init__(self, in_features: int = IN_FEATURES, out_features: int = OUT_FEATURES) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs() -> list:
    return [IN_FEATURES, OUT_FEATURES]
