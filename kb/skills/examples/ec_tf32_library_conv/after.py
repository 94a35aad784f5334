"""After: error-compensated TF32 through cuDNN. Each fp32 operand is split once into a TF32 high part and a
TF32 residual (hi = tf32(v), lo = tf32(v - hi), both rounded by integer arithmetic so cuDNN's tensor cores
read them exactly), the parts are stacked along the input channels, x as [x_lo | x_hi | x_hi] and w as
[w_hi | w_lo | w_hi] within every group, and ONE cuDNN convolution with 3C input channels sums the three
products lo*hi + hi*lo + hi*hi in fp32 on the tensor cores. TF32 is requested only inside this call's
cudnn.flags scope. The weight's stacked copy is rebuilt when the parameter changes (data_ptr, _version).
The bias, scale and LeakyReLU run in one Triton pass over the output (NCHW or channels-last).

The helpers are generic: Conv1d/2d/3d, grouped and depthwise (the stacking is per group), transposed
convolutions (the weight is stacked along its first, input-channel dimension), NCHW and channels-last inputs."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

_BLOCK = 2048


@triton.jit
def _tf32_round(v):
    # round to nearest on the 10-bit TF32 mantissa: add half an ulp of TF32, clear the 13 low bits
    bits = v.to(tl.int32, bitcast=True)
    bits = (bits + 0x1000) & -8192  # -8192 == 0xffffe000 as int32
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _split_stack3(src_ptr, dst_ptr, total, inner, LO_POS: tl.constexpr, BLOCK: tl.constexpr):
    # src viewed as [rows][inner]; dst as [rows][3][inner]: part LO_POS (0 or 1) gets the residual, the others hi
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(src_ptr + offs, mask=mask)
    hi = _tf32_round(v)
    lo = _tf32_round(v - hi)
    row = offs // inner
    dst = dst_ptr + row * 2 * inner + offs  # = row * 3 * inner + (offs - row * inner)
    if LO_POS == 0:
        tl.store(dst, lo, mask=mask)
        tl.store(dst + inner, hi, mask=mask)
    else:
        tl.store(dst, hi, mask=mask)
        tl.store(dst + inner, lo, mask=mask)
    tl.store(dst + 2 * inner, hi, mask=mask)


@triton.jit
def _split_stack3_nchw_to_nhwc(src_ptr, dst_ptr, channels, group_channels, pixels, LO_POS: tl.constexpr,
                               BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    # src NCHW (sample, channel, pixel); dst channels-last with 3C channels: pixel p of sample n holds, per
    # group, [part 0 | part 1 | part 2] of C/g channels each. Loads run along pixels, stores along channels.
    n = tl.program_id(1).to(tl.int64)
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.arange(0, BLOCK_C)
    mask = (p[:, None] < pixels) & (c[None, :] < channels)
    v = tl.load(src_ptr + n * channels * pixels + c[None, :] * pixels + p[:, None], mask=mask)
    hi = _tf32_round(v)
    lo = _tf32_round(v - hi)
    g = c // group_channels
    oc = g * 2 * group_channels + c  # = g * 3 * Cg + (c - g * Cg): the channel in part 0 of its group
    dst = dst_ptr + n * 3 * channels * pixels + p[:, None] * 3 * channels + oc[None, :]
    if LO_POS == 0:
        tl.store(dst, lo, mask=mask)
        tl.store(dst + group_channels, hi, mask=mask)
    else:
        tl.store(dst, hi, mask=mask)
        tl.store(dst + group_channels, lo, mask=mask)
    tl.store(dst + 2 * group_channels, hi, mask=mask)


@triton.jit
def _bias_scale_leaky(y_ptr, b_ptr, total, hw, channels, scale, slope, CHANNELS_LAST: tl.constexpr,
                      BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    if CHANNELS_LAST:
        c = offs % channels
    else:
        c = (offs // hw) % channels
    v = (tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + c, mask=mask)) * scale
    tl.store(y_ptr + offs, tl.where(v >= 0, v, v * slope), mask=mask)


def _channels_last_format(t: torch.Tensor):
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
        return torch.channels_last_3d
    return None


def _split_into(src: torch.Tensor, dst: torch.Tensor, inner: int, lo_pos: int) -> torch.Tensor:
    total = src.numel()
    if total:
        _split_stack3[(triton.cdiv(total, _BLOCK),)](src, dst, total, inner, LO_POS=lo_pos, BLOCK=_BLOCK,
                                                     num_warps=8)
    return dst


def stack_input(x: torch.Tensor, groups: int) -> torch.Tensor:
    """x (N, C, *spatial) -> (N, 3C, *spatial), per group [x_lo | x_hi | x_hi]; keeps channels-last data."""
    n, c, spatial = x.shape[0], x.shape[1], tuple(x.shape[2:])
    fmt = None if x.is_contiguous() else _channels_last_format(x)
    if fmt is None:
        x = x.contiguous()  # NCHW: a row is one (n, group), C/g * spatial values
        out = torch.empty((n, 3 * c, *spatial), device=x.device, dtype=x.dtype)
        return _split_into(x, out, (c // groups) * math.prod(spatial), 0)
    out = torch.empty((n, 3 * c, *spatial), device=x.device, dtype=x.dtype, memory_format=fmt)
    return _split_into(x, out, c // groups, 0)  # channels-last: a row is one (pixel, group), C/g values


def stack_input_to_channels_last(x: torch.Tensor, groups: int) -> torch.Tensor:
    """An NCHW (or NCDHW) input -> its stacked parts in channels-last form in the same pass, for cuDNN's
    channels-last tensor-core kernels (which would otherwise transpose the stacked NCHW tensor themselves)."""
    x = x.contiguous()
    n, c, spatial = x.shape[0], x.shape[1], tuple(x.shape[2:])
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    out = torch.empty((n, 3 * c, *spatial), device=x.device, dtype=x.dtype, memory_format=fmt)
    pixels = math.prod(spatial)
    block_c = triton.next_power_of_2(c)
    block_p = max(1, min(256, 8192 // block_c))
    _split_stack3_nchw_to_nhwc[(triton.cdiv(pixels, block_p), n)](x, out, c, c // groups, pixels, LO_POS=0,
                                                                  BLOCK_P=block_p, BLOCK_C=block_c, num_warps=8)
    return out


def stack_weight(w: torch.Tensor, groups: int, transposed: bool = False) -> torch.Tensor:
    """Conv weight (K, C/g, *k) -> (K, 3C/g, *k) as [w_hi | w_lo | w_hi]; transposed weight (C, K/g, *k) ->
    (3C, K/g, *k), stacked per group along its input-channel dimension."""
    w = w.detach()
    if transposed:
        w = w.contiguous()
        out = torch.empty((3 * w.shape[0], *w.shape[1:]), device=w.device, dtype=w.dtype)
        return _split_into(w, out, w.numel() // groups, 1)
    fmt = None if w.is_contiguous() else _channels_last_format(w)
    shape = (w.shape[0], 3 * w.shape[1], *w.shape[2:])
    if fmt is None:
        w = w.contiguous()
        out = torch.empty(shape, device=w.device, dtype=w.dtype)
        return _split_into(w, out, w.numel() // w.shape[0], 1)
    out = torch.empty(shape, device=w.device, dtype=w.dtype, memory_format=fmt)
    return _split_into(w, out, w.shape[1], 1)


_CONV = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}
_CONV_T = {3: F.conv_transpose1d, 4: F.conv_transpose2d, 5: F.conv_transpose3d}


def ec_tf32_conv(x: torch.Tensor, w_stacked: torch.Tensor, stride, padding, dilation, groups: int,
                 transposed: bool = False, output_padding=0, benchmark: bool = True,
                 to_channels_last: bool = False) -> torch.Tensor:
    """One cuDNN convolution over the stacked operands, TF32 inside this call's own scope, no bias.
    ``to_channels_last``: an NCHW input is stacked straight into channels-last form (pass a channels-last
    stacked weight too); the output is then channels-last."""
    if to_channels_last and x.dim() in (4, 5) and x.shape[1] <= 1024:
        xs = stack_input_to_channels_last(x, groups)
    else:
        xs = stack_input(x, groups)
    with torch.backends.cudnn.flags(enabled=True, benchmark=benchmark, deterministic=False, allow_tf32=True):
        if transposed:
            return _CONV_T[x.dim()](xs, w_stacked, None, stride, padding, output_padding, groups, dilation)
        return _CONV[x.dim()](xs, w_stacked, None, stride, padding, dilation, groups)


class WeightSplitCache:
    """The stacked weight of one parameter, rebuilt when the parameter is replaced or changed in place."""

    def __init__(self, groups: int, transposed: bool = False, channels_last: bool = False):
        self.groups, self.transposed, self.channels_last = groups, transposed, channels_last
        self.key, self.value = None, None

    def get(self, w: torch.Tensor) -> torch.Tensor:
        key = (w.data_ptr(), w._version, tuple(w.shape), tuple(w.stride()), w.device)
        if key != self.key:
            src = w.detach()
            if self.channels_last and src.dim() in (4, 5):
                src = src.contiguous(memory_format=torch.channels_last if src.dim() == 4 else torch.channels_last_3d)
            self.value = stack_weight(src, self.groups, self.transposed)
            self.key = key
        return self.value


class ModelNew(nn.Module):
    #: stack an NCHW input straight into channels-last form (cuDNN's tensor-core kernels prefer it); the
    #: output is then channels-last. Off in the measured example; the measurement script times both.
    STACK_TO_CHANNELS_LAST = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float, negative_slope: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = float(scale)
        self.negative_slope = float(negative_slope)
        self._w = WeightSplitCache(self.conv.groups, channels_last=self.STACK_TO_CHANNELS_LAST)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = self.conv
        y = ec_tf32_conv(x, self._w.get(conv.weight), conv.stride, conv.padding, conv.dilation, conv.groups,
                         to_channels_last=self.STACK_TO_CHANNELS_LAST)
        channels_last = not y.is_contiguous()
        if channels_last and _channels_last_format(y) is None:
            y = y.contiguous()
            channels_last = False
        total = y.numel()
        _bias_scale_leaky[(triton.cdiv(total, _BLOCK),)](
            y, conv.bias, total, y.shape[2] * y.shape[3], y.shape[1], self.scale, self.negative_slope,
            CHANNELS_LAST=channels_last, BLOCK=_BLOCK, num_warps=8)
        return y
