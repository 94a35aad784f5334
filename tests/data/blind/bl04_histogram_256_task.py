"""Blind-set task bl04_histogram_256: 256-bin histogram of byte-valued codes (counts as float)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, codes):
        return torch.bincount(codes, minlength=256).float()


def get_inputs():
    return [torch.randint(0, 256, (16 * 1024 * 1024,), dtype=torch.int64)]


def get_init_inputs():
    return []
