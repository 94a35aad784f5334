import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        out = torch.sub(a, torch.neg(b))
        out[0, 0] = float("nan")
        return out
