"""Blind-set task bl02_fourier_series: y = sum_k sin(k x) / k for k = 1..24 (a truncated sawtooth series) per element."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, terms: int):
        super().__init__()
        self.terms = terms

    def forward(self, x):
        y = torch.zeros_like(x)
        for k in range(1, self.terms + 1):
            y = y + torch.sin(k * x) / k
        return y


def get_inputs():
    return [torch.rand(4 * 1024 * 1024) * 6.0 - 3.0]


def get_init_inputs():
    return [24]
