"""A 64-step elementwise recurrence on a small tensor: x <- tanh(a_i * x + b_i); 256K fp32 (1 MB).

Each step is a tiny kernel (about 2 us of GPU work), so the forward is bound by launch overhead.
"""

import torch
import torch.nn as nn

STEPS = 64


class Model(nn.Module):
    def __init__(self, steps: int = STEPS):
        super().__init__()
        self.a = nn.Parameter(torch.rand(steps) * 0.5 + 0.75)
        self.b = nn.Parameter(torch.randn(steps) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.a.numel()):
            x = torch.tanh(x * self.a[i] + self.b[i])
        return x


N = 256 * 1024


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return [STEPS]
