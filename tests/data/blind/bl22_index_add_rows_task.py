"""Blind-set task bl22_index_add_rows: segment sum: out[idx[i], :] += src[i, :] into a small output (index_add), global float atomics."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, out_rows: int):
        super().__init__()
        self.out_rows = out_rows

    def forward(self, src, idx):
        out = torch.zeros(self.out_rows, src.shape[1], device=src.device, dtype=src.dtype)
        return out.index_add_(0, idx, src)


def get_inputs():
    return [torch.randn(262144, 64), torch.randint(0, 512, (262144,), dtype=torch.int64)]


def get_init_inputs():
    return [512]
