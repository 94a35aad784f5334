import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sumsq(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * n_cols + c, mask=c < n_cols, other=0.0)
    tl.store(out_ptr + r, tl.sum(x * x, axis=0))


@triton.jit
def row_scale(x_ptr, s_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * n_cols + c, mask=c < n_cols)
    s = tl.load(s_ptr + r)
    tl.store(y_ptr + r * n_cols + c, x * tl.rsqrt(s / n_cols + eps), mask=c < n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        s = torch.empty(rows, device=x.device, dtype=x.dtype)
        y = torch.empty_like(x)
        B = triton.next_power_of_2(cols)
        row_sumsq[(rows,)](x, s, cols, BLOCK=B)
        row_scale[(rows,)](x, s, y, cols, 1e-6, BLOCK=B)
        return y
