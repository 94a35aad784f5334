# Writes the result into an input and returns that input.
import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        a.sub_(torch.neg(b))
        return a
