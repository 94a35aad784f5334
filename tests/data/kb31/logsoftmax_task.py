"""y = log_softmax(x, dim=1), fp32, 2048 x 32768 (a test task of issue 31, not a KB example)."""

import torch
import torch.nn as nn

batch_size = 2048
dim = 32768


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
