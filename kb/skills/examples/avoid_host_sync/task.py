"""Max-abs normalisation: y = x / max(|x|); 32M fp32 (128 MB)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.abs().max()


N = 32 * 1024 * 1024


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
