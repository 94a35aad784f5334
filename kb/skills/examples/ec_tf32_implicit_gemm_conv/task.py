"""3x3 convolution, stride 1, padding 1, no bias: 32 x 128 x 56 x 56 -> 128 channels, fp32 in true fp32
(cuDNN's TF32 off). As a GEMM: M = 32 * 56 * 56 = 100352 pixels, N = 128 channels, K = 128 * 9 = 1152
(29.6 GFLOP)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # true fp32: PyTorch would otherwise let cuDNN run this convolution in TF32
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=False, allow_tf32=False):
            return self.conv(x)


N, C, H, W, K = 32, 128, 56, 56, 128


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C, K]
