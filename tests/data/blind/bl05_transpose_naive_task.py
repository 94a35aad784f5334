"""Blind-set task bl05_transpose_naive: out = x.t() materialised; one thread per element, reads along rows, writes down columns."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.t().contiguous()


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []
