import torch
import torch.nn as nn

N = 1 << 24


class Model(nn.Module):
    """Swish: x * sigmoid(x), elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
