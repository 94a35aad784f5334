"""Blind-set task bl17_depthwise_conv3x3: depthwise 3x3 convolution (groups = channels), padding 1, NCHW; one thread per output."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w):
        return torch.nn.functional.conv2d(x, w, padding=1, groups=x.shape[1])


def get_inputs():
    return [torch.randn(16, 128, 112, 112), torch.randn(128, 1, 3, 3)]


def get_init_inputs():
    return []
