# Asks for 4 TB of device memory.
import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        scratch = torch.empty(1 << 40, dtype=torch.float32, device=a.device)
        return scratch[: a.numel()].view_as(a)
