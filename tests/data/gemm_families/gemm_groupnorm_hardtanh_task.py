import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, group normalisation over the features, then a clamp to [lo, hi]."""

    def __init__(self, d_in, d_out, groups, lo, hi):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)
        self.norm = nn.GroupNorm(groups, d_out)
        self.clamp = nn.Hardtanh(min_val=lo, max_val=hi)

    def forward(self, x):
        return self.clamp(self.norm(self.proj(x)))


rows, d_in, d_out, groups = 512, 2048, 4096, 8


def get_inputs():
    return [torch.randn(rows, d_in)]


def get_init_inputs():
    return [d_in, d_out, groups, -1.5, 1.5]
