import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, a constant scale, then a leaky ReLU."""

    def __init__(self, d_in, d_out, scale, slope):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)
        self.scale = scale
        self.act = nn.LeakyReLU(slope)

    def forward(self, x):
        return self.act(self.fc(x) * self.scale)


rows, d_in, d_out = 2048, 4096, 4096


def get_inputs():
    return [torch.randn(rows, d_in)]


def get_init_inputs():
    return [d_in, d_out, 0.5, 0.02]
