import torch
import torch.nn as nn


class Model(nn.Module):
    """3x3 convolution, ReLU, then a learned per-channel bias added on top."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1)
        self.extra = nn.Parameter(torch.randn(c_out, 1, 1) * 0.1)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.extra


batch, c_in, c_out, size = 32, 64, 128, 64


def get_inputs():
    return [torch.randn(batch, c_in, size, size)]


def get_init_inputs():
    return [c_in, c_out]
