"""Blind-set task bl12_piecewise_activation: a piecewise activation whose four pieces each run different math, chosen per element."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        a = torch.expm1(x + 2.0)
        b = torch.sin(3.0 * x) * x
        c = torch.log1p(x * x) + torch.tanh(x)
        d = torch.sqrt(x) * torch.cos(x)
        return torch.where(x < -2.0, a,
               torch.where(x < 0.0, b, torch.where(x < 2.0, c, d)))


def get_inputs():
    return [torch.randn(16 * 1024 * 1024) * 3.0]


def get_init_inputs():
    return []
