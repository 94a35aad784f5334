"""Linear (1024 -> 512) then GroupNorm (16 groups) then Hardtanh on a batch of 2048 rows, fp32: a GEMM with a
normalising epilogue and no transcendental op."""

import torch
import torch.nn as nn

BATCH = 2048
IN_FEATURES = 1024
OUT_FEATURES = 512
GROUPS = 16


class Model(nn.Module):
    def __init__(self, in_features: int = IN_FEATURES, out_features: int = OUT_FEATURES, groups: int = GROUPS):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.hardtanh(self.norm(self.linear(x)), min_val=-2.0, max_val=2.0)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs() -> list:
    return [IN_FEATURES, OUT_FEATURES, GROUPS]
