"""Blind-set task bl26_linear_gelu_cublas: y = gelu(x @ W + b); the GEMM stays in torch (cuBLAS), a custom kernel adds the bias and applies GELU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w, b):
        return torch.nn.functional.gelu(x @ w + b)


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096) * 0.02, torch.randn(4096)]


def get_init_inputs():
    return []
