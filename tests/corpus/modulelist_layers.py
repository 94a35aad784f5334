import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void fused_add_relu_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(a[i] + b[i], 0.f);
}

torch::Tensor fused_add_relu(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    fused_add_relu_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
ext = load_inline(name="add_relu_blk", cpp_sources="torch::Tensor fused_add_relu(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=cuda_src, functions=["fused_add_relu"], verbose=False)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return ext.fused_add_relu(self.conv(x), x)


class ModelNew(nn.Module):
    def __init__(self, c=64, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList([Block(c) for _ in range(depth)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x
