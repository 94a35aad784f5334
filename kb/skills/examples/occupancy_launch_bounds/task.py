"""Depthwise 1-D convolution (groups = channels, 31 taps, no padding, no bias): x 16 x 64 x 65536 fp32 (256 MB)."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
LENGTH = 65536
TAPS = 31


class Model(nn.Module):
    def __init__(self, channels: int = CHANNELS, taps: int = TAPS) -> None:
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, taps, groups=channels, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs() -> list:
    return [CHANNELS, TAPS]
