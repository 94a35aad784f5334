# A plain TF32 convolution inside a fp32 task (cuDNN's TF32 switched on in a scope): fails the fp32 checks.
import torch
import torch.nn.functional as F


class ModelNew(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x):
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
            y = F.conv2d(x, self.conv.weight, self.conv.bias, padding=1)
        return torch.relu(y)
