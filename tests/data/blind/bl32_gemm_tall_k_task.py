"""Blind-set task bl32_gemm_tall_k: C = A @ B with a small output (128 x 128) and a long reduction (K = 65536); 32x32 shared tiles."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(128, 65536), torch.randn(65536, 128)]


def get_init_inputs():
    return []
