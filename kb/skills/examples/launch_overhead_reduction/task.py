"""SiLU over 48 independent small tensors (16K-64K fp32 each), as an optimizer step or a parameter list sees them.

The work is 8 MB in all; one launch per tensor makes the forward a sequence of host-side call costs.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

COUNT = 48


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, *xs: torch.Tensor):
        return tuple(F.silu(x) for x in xs)


def get_inputs():
    return [torch.randn(16384 * (1 + i % 4)) for i in range(COUNT)]


def get_init_inputs():
    return []
