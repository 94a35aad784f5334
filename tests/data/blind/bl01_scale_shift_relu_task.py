"""Blind-set task bl01_scale_shift_relu: y = relu(x * a + b) over a large activation."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, a: float, b: float):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):
        return torch.relu(x * self.a + self.b)


def get_inputs():
    return [torch.randn(32, 1024, 1024)]


def get_init_inputs():
    return [1.7, -0.25]
