"""A direct fp32 convolution on CUDA cores, one thread per output: the situation that used to end the
loop (compute-bound, tensor cores vetoed by the strict precision rule, cuDNN by the library policy)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

// y[n][k][p][q] = relu(b[k] + sum_c sum_r sum_s x[n][c][p + r - 1][q + s - 1] * w[k][c][r][s])
__global__ void conv3x3_fp32_direct(const float* __restrict__ x, const float* __restrict__ w,
                                    const float* __restrict__ b, float* __restrict__ y,
                                    int N, int C, int H, int W, int K) {
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)N * K * H * W) return;
    const int q = i % W, p = (i / W) % H, k = (i / ((long)H * W)) % K, n = i / ((long)H * W * K);
    float acc = b[k];
    for (int c = 0; c < C; ++c) {
        const float* xp = x + ((long)n * C + c) * H * W;
        const float* wp = w + ((long)k * C + c) * 9;
        for (int r = 0; r < 3; ++r) {
            const int ih = p + r - 1;
            if (ih < 0 || ih >= H) continue;
            for (int s = 0; s < 3; ++s) {
                const int iw = q + s - 1;
                if (iw >= 0 && iw < W) acc = fmaf(xp[ih * W + iw], wp[r * 3 + s], acc);
            }
        }
    }
    y[i] = fmaxf(acc, 0.f);
}

torch::Tensor conv_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    x = x.contiguous(); w = w.contiguous();
    const int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), K = w.size(0);
    auto y = torch::empty({N, K, H, W}, x.options());
    const long total = y.numel();
    conv3x3_fp32_direct<<<(unsigned)((total + 255) / 256), 256>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), N, C, H, W, K);
    return y;
}
"""

CPP_SRC = "torch::Tensor conv_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(name="ks_test_conv3x3_direct", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   functions=["conv_relu"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_relu(x, self.conv.weight, self.conv.bias)
