"""Blind-set task bl18_maxpool2x2: 2x2 max pooling, stride 2, NCHW; one thread per output."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, 2)


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return []
