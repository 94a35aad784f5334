# A pure-Python stand-in for a correct kernel: different torch ops than the reference (a - (-b)).
import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.sub(a, torch.neg(b))
