"""Held-out: direct 2D convolution, NCHW fp32 (N=16, C=64, H=W=128, 128 filters 3x3, stride 1, no
padding), one thread per output element looping over input channels and taps from global memory
(KernelBench L1 "conv_standard_2D", an LLM's first version)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void conv2d_kernel(const float* input, const float* weight, float* output,
                              int N, int C, int H, int W, int F, int KH, int KW, int OH, int OW) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = N * F * OH * OW;
    if (idx >= total) return;
    int ow = idx % OW;
    int oh = (idx / OW) % OH;
    int f = (idx / (OW * OH)) % F;
    int n = idx / (OW * OH * F);
    float sum = 0.0f;
    for (int c = 0; c < C; ++c) {
        for (int kh = 0; kh < KH; ++kh) {
            for (int kw = 0; kw < KW; ++kw) {
                int ih = oh + kh;
                int iw = ow + kw;
                sum += input[((n * C + c) * H + ih) * W + iw] * weight[((f * C + c) * KH + kh) * KW + kw];
            }
        }
    }
    output[idx] = sum;
}

torch::Tensor conv2d_cuda(torch::Tensor input, torch::Tensor weight) {
    int N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
    int F = weight.size(0), KH = weight.size(2), KW = weight.size(3);
    int OH = H - KH + 1, OW = W - KW + 1;
    auto output = torch::empty({N, F, OH, OW}, input.options());
    int total = N * F * OH * OW;
    int threads = 256;
    conv2d_kernel<<<(total + threads - 1) / threads, threads>>>(
        input.data_ptr<float>(), weight.data_ptr<float>(), output.data_ptr<float>(),
        N, C, H, W, F, KH, KW, OH, OW);
    return output;
}
"""

cpp_source = "torch::Tensor conv2d_cuda(torch::Tensor input, torch::Tensor weight);"

conv = load_inline(name="heldout_conv2d_direct", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["conv2d_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int = 64, out_channels: int = 128, kernel_size: int = 3) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size) * 0.05)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv.conv2d_cuda(x.contiguous(), self.weight.contiguous())
