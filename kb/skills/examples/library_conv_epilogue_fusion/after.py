"""After: cuDNN in true fp32 without its bias, then ONE Triton kernel for the whole tail. A program owns one
(sample, group): the first sweep adds the conv bias and merges per-chunk mean and M2 (Chan's parallel
formula, no E[x^2] - mean^2 cancellation); the second sweep, whose reads mostly hit L2, normalises, applies
GroupNorm's affine, the scale and the clamp, and writes the output once. NCHW and channels-last outputs
(a constexpr switch picks the index order so both sweeps stay coalesced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

_BLOCK = 4096


@triton.jit
def _bias_groupnorm_scale_clamp(y_ptr, out_ptr, bias_ptr, gamma_ptr, beta_ptr, hw, channels, group_channels,
                                group_size, num_groups, eps, scale, lo, hi, CHANNELS_LAST: tl.constexpr,
                                BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n = pid // num_groups
    g = pid % num_groups
    size = group_size
    sample = n.to(tl.int64) * channels * hw
    zero = tl.sum(tl.zeros([BLOCK], tl.float32), axis=0)
    count, mean, m2 = zero, zero, zero
    for start in tl.range(0, size, BLOCK):
        j = start + tl.arange(0, BLOCK)
        mask = j < size
        if CHANNELS_LAST:
            c = g * group_channels + j % group_channels
            offs = sample + (j // group_channels) * channels + c
        else:
            c = g * group_channels + j // hw
            offs = sample + c.to(tl.int64) * hw + j % hw
        v = tl.load(y_ptr + offs, mask=mask, other=0.0) + tl.load(bias_ptr + c, mask=mask, other=0.0)
        cnt = tl.sum(mask.to(tl.float32), axis=0)
        chunk_mean = tl.sum(v, axis=0) / cnt
        d = tl.where(mask, v - chunk_mean, 0.0)
        chunk_m2 = tl.sum(d * d, axis=0)
        total = count + cnt
        delta = chunk_mean - mean
        mean = mean + delta * (cnt / total)
        m2 = m2 + chunk_m2 + delta * delta * (count * cnt / total)
        count = total
    rstd = 1.0 / tl.sqrt(m2 / count + eps)
    for start in tl.range(0, size, BLOCK):
        j = start + tl.arange(0, BLOCK)
        mask = j < size
        if CHANNELS_LAST:
            c = g * group_channels + j % group_channels
            offs = sample + (j // group_channels) * channels + c
        else:
            c = g * group_channels + j // hw
            offs = sample + c.to(tl.int64) * hw + j % hw
        v = tl.load(y_ptr + offs, mask=mask, other=0.0) + tl.load(bias_ptr + c, mask=mask, other=0.0)
        w = tl.load(gamma_ptr + c, mask=mask, other=0.0)
        b = tl.load(beta_ptr + c, mask=mask, other=0.0)
        o = ((v - mean) * rstd * w + b) * scale
        o = tl.minimum(tl.maximum(o, lo), hi)
        tl.store(out_ptr + offs, o, mask=mask)


def fused_bias_groupnorm_scale_clamp(y, bias, gamma, beta, num_groups, eps, scale, lo, hi):
    channels_last = y.dim() == 4 and not y.is_contiguous() and y.is_contiguous(memory_format=torch.channels_last)
    if not channels_last:
        y = y.contiguous()
    n, c = y.shape[0], y.shape[1]
    hw = y.shape[2] * y.shape[3]
    # in place: each program reads its own (sample, group) twice and writes it after its statistics
    _bias_groupnorm_scale_clamp[(n * num_groups,)](
        y, y, bias, gamma, beta, hw, c, c // num_groups, (c // num_groups) * hw, num_groups, eps, scale, lo, hi,
        CHANNELS_LAST=channels_last, BLOCK=_BLOCK, num_warps=8)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int, scale: float,
                 clamp_min: float, clamp_max: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.scale = float(scale)
        self.clamp_min, self.clamp_max = float(clamp_min), float(clamp_max)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=False):
            y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding)
        gn = self.group_norm
        return fused_bias_groupnorm_scale_clamp(y, self.conv.bias, gn.weight, gn.bias, gn.num_groups, gn.eps,
                                                self.scale, self.clamp_min, self.clamp_max)
