"""Blind-set task bl16_conv3x3_direct: 3x3 convolution, stride 1, padding 1, NCHW fp32; one thread per output value, direct loops."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w):
        return torch.nn.functional.conv2d(x, w, padding=1)


def get_inputs():
    return [torch.randn(8, 64, 56, 56), torch.randn(128, 64, 3, 3) * 0.05]


def get_init_inputs():
    return []
