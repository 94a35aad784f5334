"""Row softmax over very long rows: 256 rows x 262144 fp32 (256 MB, four times the H200's L2)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


BATCH, DIM = 256, 262144


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
