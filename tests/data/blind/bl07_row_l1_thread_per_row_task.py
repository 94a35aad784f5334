"""Blind-set task bl07_row_l1_thread_per_row: mean absolute value of each row; one thread walks a whole row."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.abs().mean(dim=1)


def get_inputs():
    return [torch.randn(65536, 512)]


def get_init_inputs():
    return []
