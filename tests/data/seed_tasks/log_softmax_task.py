import torch
import torch.nn as nn

ROWS = 4096
COLS = 8192


class Model(nn.Module):
    """Row-wise log-softmax of a 2-D tensor (no kernel yet: the reference alone)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
