"""Blind-set task bl11_sum_interleaved_tree: sum of a large vector: shared-memory tree with interleaved addressing (tid % (2s)), one atomic per block."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum().reshape(1)


def get_inputs():
    return [torch.randn(32 * 1024 * 1024)]


def get_init_inputs():
    return []
