"""Blind-set kernel bl01_scale_shift_relu: a first CUDA version of the task (y = relu(x * a + b) over a large activation)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void scale_shift_relu_kernel(const float* x, float* y, float a, float b, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] * a + b;
        y[i] = v > 0.f ? v : 0.f;
    }
}

torch::Tensor scale_shift_relu(torch::Tensor x, double a, double b) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    scale_shift_relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)a, (float)b, n);
    return y;
}
"""

CPP_SRC = """
torch::Tensor scale_shift_relu(torch::Tensor x, double a, double b);
"""

_ext = load_inline(
    name="blind_bl01_scale_shift_relu",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['scale_shift_relu'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, a: float, b: float):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):
        return _ext.scale_shift_relu(x.contiguous(), self.a, self.b)
