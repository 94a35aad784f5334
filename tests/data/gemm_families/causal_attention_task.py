import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Masked multi-head self-attention with a fused QKV projection and an output projection."""

    def __init__(self, width, heads, max_len):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        s = s.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(s, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


batch, seq, width, heads = 16, 256, 512, 8


def get_inputs():
    return [torch.randn(batch, seq, width)]


def get_init_inputs():
    return [width, heads, 1024]
