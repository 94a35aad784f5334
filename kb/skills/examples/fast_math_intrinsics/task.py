"""Gaussian-windowed sine features summed over 16 centres: 32 transcendentals per element.

y = sum_k exp(-gamma * (x - c_k)^2) * sin(w_k * x), x: 16M fp32 (64 MB). Compute-bound by the accurate
expf/sinf sequences, not by memory.
"""

import torch
import torch.nn as nn

K = 16


class Model(nn.Module):
    def __init__(self, gamma: float = 2.0):
        super().__init__()
        self.gamma = gamma
        self.register_buffer("centers", torch.linspace(-2.0, 2.0, K))
        self.register_buffer("freqs", torch.linspace(0.5, 4.0, K))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.unsqueeze(-1) - self.centers
        return (torch.exp(-self.gamma * d * d) * torch.sin(x.unsqueeze(-1) * self.freqs)).sum(-1)


N = 16 * 1024 * 1024


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return [2.0]
