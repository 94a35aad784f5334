"""Blind-set task bl35_residual_bias_gelu_two_kernels: y = gelu(x + residual + bias[col]); two float4 kernels (add, then GELU) through a temporary."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, residual, bias):
        return torch.nn.functional.gelu(x + residual + bias, approximate="tanh")


def get_inputs():
    return [torch.randn(8192, 4096), torch.randn(8192, 4096), torch.randn(4096)]


def get_init_inputs():
    return []
