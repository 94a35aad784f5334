"""Blind-set task bl13_sgemm_naive: C = A @ B (fp32, square); one thread per output, operands read straight from global memory."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(2048, 2048), torch.randn(2048, 2048)]


def get_init_inputs():
    return []
