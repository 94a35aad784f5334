import torch
import torch.nn as nn

BATCH = 512
IN_FEATURES = 1024
OUT_FEATURES = 2048


class Model(nn.Module):
    """Linear projection, then LayerNorm over the features and a GELU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)

    def forward(self, x):
        y = self.proj(x)
        y = self.norm(y)
        return torch.nn.functional.gelu(y)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
