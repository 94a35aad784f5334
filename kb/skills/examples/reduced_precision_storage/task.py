"""Embedding-bag sum: 65536 bags of 16 rows from a 1M x 128 fp32 table (512 MB); gather-bound."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.table = nn.Embedding(num_embeddings, dim)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table(idx).sum(dim=1)


V, D, BAGS, BAG = 1024 * 1024, 128, 65536, 16


def get_inputs():
    return [torch.randint(0, V, (BAGS, BAG))]


def get_init_inputs():
    return [V, D]
