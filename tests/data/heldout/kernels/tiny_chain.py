"""Held-out: scale, add bias, then clamp on a 128 x 256 fp32 tensor (KernelBench L2 style), as three
separate elementwise kernels launched from Python: each runs about 2 us."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void scale_kernel(const float* x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s;
}

__global__ void bias_kernel(float* y, const float* b, int cols, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += b[i % cols];
}

__global__ void clamp_kernel(float* y, float lo, float hi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fminf(fmaxf(y[i], lo), hi);
}

torch::Tensor scale_cuda(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    return y;
}

torch::Tensor bias_cuda(torch::Tensor y, torch::Tensor b) {
    int n = y.numel();
    bias_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), b.numel(), n);
    return y;
}

torch::Tensor clamp_cuda(torch::Tensor y, double lo, double hi) {
    int n = y.numel();
    clamp_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), (float)lo, (float)hi, n);
    return y;
}
"""

cpp_source = """
torch::Tensor scale_cuda(torch::Tensor x, double s);
torch::Tensor bias_cuda(torch::Tensor y, torch::Tensor b);
torch::Tensor clamp_cuda(torch::Tensor y, double lo, double hi);
"""

ext = load_inline(name="heldout_tiny_chain", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["scale_cuda", "bias_cuda", "clamp_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features: int = 256, scale: float = 2.0) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = ext.scale_cuda(x.contiguous(), self.scale)
        y = ext.bias_cuda(y, self.bias)
        return ext.clamp_cuda(y, -1.0, 1.0)
