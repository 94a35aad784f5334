"""Held-out: 3x3 box blur (9-point stencil with fixed weights) on an 8192 x 8192 fp32 grid, one
thread per output, border cells copied."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void blur3x3_kernel(const float* in, float* out, int H, int W) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    if (x == 0 || y == 0 || x == W - 1 || y == H - 1) {
        out[y * W + x] = in[y * W + x];
        return;
    }
    float s = 0.0f;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++)
            s += in[(y + dy) * W + (x + dx)];
    out[y * W + x] = s * (1.0f / 9.0f);
}

torch::Tensor blur3x3(torch::Tensor in) {
    int H = in.size(0), W = in.size(1);
    auto out = torch::empty_like(in);
    dim3 block(32, 8);
    dim3 grid((W + 31) / 32, (H + 7) / 8);
    blur3x3_kernel<<<grid, block>>>(in.data_ptr<float>(), out.data_ptr<float>(), H, W);
    return out;
}
"""

cpp_source = "torch::Tensor blur3x3(torch::Tensor in);"

ext = load_inline(name="heldout_stencil3x3", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["blur3x3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.blur3x3(x.contiguous())
