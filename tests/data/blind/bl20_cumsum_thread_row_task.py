"""Blind-set task bl20_cumsum_thread_row: inclusive prefix sum along each row; one thread scans a whole row sequentially."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.randn(8192, 2048)]


def get_init_inputs():
    return []
