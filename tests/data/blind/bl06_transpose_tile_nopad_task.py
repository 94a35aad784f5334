"""Blind-set task bl06_transpose_tile_nopad: batched matrix transpose through a 32x32 shared tile without padding."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.transpose(1, 2).contiguous()


def get_inputs():
    return [torch.randn(16, 2048, 2048)]


def get_init_inputs():
    return []
