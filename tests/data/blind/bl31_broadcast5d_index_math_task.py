"""Blind-set task bl31_broadcast5d_index_math: y = x * scale[c] + shift[w] on a 5-D NCDHW tensor; full 64-bit index decomposition per element."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, scale, shift):
        return x * scale.view(1, -1, 1, 1, 1) + shift.view(1, 1, 1, 1, -1)


def get_inputs():
    return [torch.randn(8, 32, 16, 64, 96), torch.randn(32), torch.randn(96)]


def get_init_inputs():
    return []
