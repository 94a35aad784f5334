# Error-compensated TF32 through cuDNN: each operand split into a TF32 high part and a fp32 residual, three
# TF32 convolutions summed (hi*hi + lo*hi + hi*lo) inside a TF32 scope: fp32-level accuracy on tensor cores.
# Note: torch.backends.cudnn.flags(allow_tf32=True) alone would also disable cuDNN (enabled=False by default).
import torch
import torch.nn.functional as F


def split_tf32(t):
    hi = (t.view(torch.int32) & -8192).view(torch.float32)  # keep sign, exponent and the top 10 mantissa bits
    return hi, t - hi


class ModelNew(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x):
        xh, xl = split_tf32(x.contiguous())
        wh, wl = split_tf32(self.conv.weight.contiguous())
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
            y = F.conv2d(xh, wh, padding=1)
            y = y + F.conv2d(xl, wh, padding=1)
            y = y + F.conv2d(xh, wl, padding=1)
        return torch.relu(y + self.conv.bias.view(1, -1, 1, 1))
