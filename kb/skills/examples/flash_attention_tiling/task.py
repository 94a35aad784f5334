"""Scaled dot-product attention, fp32: batch 4, 8 heads, 1024 tokens, head dim 64."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


B, H, N, D = 4, 8, 1024, 64


def get_inputs():
    return [torch.randn(B, H, N, D), torch.randn(B, H, N, D), torch.randn(B, H, N, D)]


def get_init_inputs():
    return []
