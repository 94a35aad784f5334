# Seeded construction: the same parameter shapes in the same order give the same weights.
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, x):
        y = torch.einsum("bi,oi->bo", x, self.weight)
        return y.clamp_min(0) + y.clamp_min(0)
