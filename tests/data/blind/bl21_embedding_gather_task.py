"""Blind-set task bl21_embedding_gather: embedding lookup: out[i, :] = table[ids[i], :]; one thread per output element."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, ids, table):
        return table[ids]


def get_inputs():
    return [torch.randint(0, 100000, (65536,), dtype=torch.int64), torch.randn(100000, 256)]


def get_init_inputs():
    return []
