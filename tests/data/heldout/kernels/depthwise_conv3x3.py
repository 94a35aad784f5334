"""Held-out: depthwise 3x3 convolution, NCHW fp32 (N=16, C=128, H=W=256, padding 1), one thread per
output reading its nine taps from global memory (KernelBench L1 "conv_depthwise_2D")."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void depthwise_conv_kernel(const float* x, const float* w, float* y, int N, int C, int H, int W) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = N * C * H * W;
    if (idx < total) {
        int ow = idx % W;
        int oh = (idx / W) % H;
        int c = (idx / (W * H)) % C;
        const float* plane = x + (idx / (W * H)) * H * W;
        float acc = 0.0f;
        for (int kh = 0; kh < 3; kh++) {
            for (int kw = 0; kw < 3; kw++) {
                int ih = oh + kh - 1;
                int iw = ow + kw - 1;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
                    acc += plane[ih * W + iw] * w[c * 9 + kh * 3 + kw];
                }
            }
        }
        y[idx] = acc;
    }
}

torch::Tensor depthwise_conv(torch::Tensor x, torch::Tensor w) {
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    auto y = torch::empty_like(x);
    int total = N * C * H * W;
    depthwise_conv_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                        y.data_ptr<float>(), N, C, H, W);
    return y;
}
"""

cpp_source = "torch::Tensor depthwise_conv(torch::Tensor x, torch::Tensor w);"

ext = load_inline(name="heldout_depthwise_conv3x3", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["depthwise_conv"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, channels: int = 128) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, 1, 3, 3) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.depthwise_conv(x.contiguous(), self.weight.contiguous())
