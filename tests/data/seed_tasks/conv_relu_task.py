import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
FILTERS = 128
SIZE = 56


class Model(nn.Module):
    """3 x 3 convolution with padding 1, then ReLU."""

    def __init__(self, channels, filters):
        super().__init__()
        self.conv = nn.Conv2d(channels, filters, kernel_size=3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, FILTERS]
