import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void clip_kernel(const float* x, float* y, float limit, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fminf(fmaxf(x[i], -limit), limit);
}

torch::Tensor clip(torch::Tensor x, double limit) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    clip_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)limit, n);
    return y;
}
"""
ext = load_inline(name="clip_item", cpp_sources="torch::Tensor clip(torch::Tensor x, double limit);", cuda_sources=src,
                  functions=["clip"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        limit = x.abs().max().item() * 0.5
        return ext.clip(x, limit)
