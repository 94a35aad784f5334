"""Blind-set task bl36_bmm8_per_thread: batched 8x8 matrix products (A_i @ B_i for a million pairs); each thread loads both matrices into registers."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(1 << 20, 8, 8), torch.randn(1 << 20, 8, 8)]


def get_init_inputs():
    return []
