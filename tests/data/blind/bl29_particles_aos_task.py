"""Blind-set task bl29_particles_aos: explicit Euler step for particles stored as an array of 8-float records (x y z vx vy vz m pad)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dt: float):
        super().__init__()
        self.dt = dt

    def forward(self, p):
        out = p.clone()
        out[:, 0:3] = p[:, 0:3] + self.dt * p[:, 3:6]
        out[:, 3:6] = p[:, 3:6] * (1.0 - 0.01 * self.dt / p[:, 6:7])
        return out


def get_inputs():
    p = torch.randn(1 << 22, 8)
    p[:, 6] = torch.rand(1 << 22) + 0.5
    return [p]


def get_init_inputs():
    return [0.01]
