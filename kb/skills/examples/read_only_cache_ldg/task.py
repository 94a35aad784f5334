"""A 15-tap 1-D FIR filter (zero padded) over 64M fp32 samples (256 MB): y[i] = sum_k w[k] x[i + k - 7]."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TAPS = 15


class Model(nn.Module):
    def __init__(self, taps: int = TAPS):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(taps) / taps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.weight.numel()
        return F.conv1d(x.view(1, 1, -1), self.weight.view(1, 1, -1), padding=k // 2).view(-1)


N = 64 * 1024 * 1024


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return [TAPS]
