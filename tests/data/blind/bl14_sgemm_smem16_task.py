"""Blind-set task bl14_sgemm_smem16: C = A @ B^T + bias (fp32, a linear layer); 16x16 shared-memory tiles, one output per thread."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w, bias):
        return torch.nn.functional.linear(x, w, bias)


def get_inputs():
    return [torch.randn(4096, 2048), torch.randn(2048, 2048) * 0.02, torch.randn(2048)]


def get_init_inputs():
    return []
