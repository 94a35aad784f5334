"""Blind-set task bl15_gemv_thread_row: y = A @ v (matrix-vector); one thread per output row."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, v):
        return a @ v


def get_inputs():
    return [torch.randn(8192, 8192), torch.randn(8192)]


def get_init_inputs():
    return []
