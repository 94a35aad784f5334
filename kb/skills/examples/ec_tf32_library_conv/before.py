"""Before: cuDNN in true fp32 (TF32 off inside the call's own scope, as a strict fp32 tolerance demands), then one
Triton pass over the output for bias, scale and LeakyReLU. Correct at 1e-4, but the convolution runs on the FP32
pipe while eager PyTorch (cuDNN's TF32 default) runs it on the tensor cores."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _bias_scale_leaky(y_ptr, b_ptr, total, hw, channels, scale, slope, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c = (offs // hw) % channels
    v = (tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + c, mask=mask)) * scale
    tl.store(y_ptr + offs, tl.where(v >= 0, v, v * slope), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float, negative_slope: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = float(scale)
        self.negative_slope = float(negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=False):
            y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding)
        total = y.numel()
        hw = y.shape[2] * y.shape[3]
        _bias_scale_leaky[(triton.cdiv(total, 2048),)](y, self.conv.bias, total, hw, y.shape[1], self.scale,
                                                       self.negative_slope, BLOCK=2048, num_warps=8)
        return y
