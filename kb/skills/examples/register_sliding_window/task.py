"""A vertical 9-tap filter over an 8192 x 8192 fp32 image (256 MB), zero padded:
y[i, j] = sum_{k=-4..4} w[k + 4] * x[i + k, j]."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TAPS = 9


class Model(nn.Module):
    def __init__(self, taps: int = TAPS):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(taps) / taps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.weight.numel()
        out = F.conv2d(x[None, None], self.weight.view(1, 1, k, 1), padding=(k // 2, 0))
        return out[0, 0]


H, W = 8192, 8192


def get_inputs():
    return [torch.randn(H, W)]


def get_init_inputs():
    return [TAPS]
