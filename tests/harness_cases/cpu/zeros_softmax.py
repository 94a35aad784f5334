# All zeros: passes allclose(atol=1e-4) on softmax over 393216 columns; must still fail.
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
