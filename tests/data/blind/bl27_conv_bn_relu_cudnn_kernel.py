"""Blind-set kernel bl27_conv_bn_relu_cudnn: a first CUDA version of the task (conv2d (torch/cuDNN) followed by inference batch-norm and ReLU in a custom kernel)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void bn_relu_kernel(const float* x, const float* g, const float* b, const float* mean, const float* var,
                               float* y, int C, int HW, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int c = (i / HW) % C;
    float v = (x[i] - mean[c]) / sqrtf(var[c] + 1e-5f) * g[c] + b[c];
    y[i] = v > 0.f ? v : 0.f;
}

torch::Tensor bn_relu(torch::Tensor x, torch::Tensor g, torch::Tensor b, torch::Tensor mean, torch::Tensor var) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    int C = x.size(1), HW = x.size(2) * x.size(3);
    bn_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), g.data_ptr<float>(), b.data_ptr<float>(),
        mean.data_ptr<float>(), var.data_ptr<float>(), y.data_ptr<float>(), C, HW, n);
    return y;
}
"""

CPP_SRC = """
torch::Tensor bn_relu(torch::Tensor x, torch::Tensor g, torch::Tensor b, torch::Tensor mean, torch::Tensor var);
"""

_ext = load_inline(
    name="blind_bl27_conv_bn_relu_cudnn",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['bn_relu'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x, w, gamma, beta, mean, var):
        y = torch.nn.functional.conv2d(x, w, padding=1)
        return _ext.bn_relu(y.contiguous(), gamma.contiguous(), beta.contiguous(), mean.contiguous(), var.contiguous())
