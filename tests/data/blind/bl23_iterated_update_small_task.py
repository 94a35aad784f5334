"""Blind-set task bl23_iterated_update_small: 60 steps of x = 0.9 x + 0.1 tanh(x) on a small state vector, one kernel launch per step."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def forward(self, x):
        for _ in range(self.steps):
            x = 0.9 * x + 0.1 * torch.tanh(x)
        return x


def get_inputs():
    return [torch.randn(8192)]


def get_init_inputs():
    return [60]
