# Returns a tensor subclass (a lazy tensor would be one).
import torch


class Lazy(torch.Tensor):
    pass


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.sub(a, torch.neg(b)).as_subclass(Lazy)
