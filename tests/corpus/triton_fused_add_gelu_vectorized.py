import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_gelu(x_ptr, b_ptr, y_ptr, n, C, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs % C, mask=m)
    v = x + b
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=m)


class ModelNew(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(C))

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        add_gelu[(triton.cdiv(n, 2048),)](x, self.bias, y, n, self.bias.numel(), BLOCK=2048)
        return y
