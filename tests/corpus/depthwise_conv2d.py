import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void depthwise_conv2d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                        float* __restrict__ y, int B, int C, int H, int W, int KS, int pad) {
    int ow = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = blockIdx.y * blockDim.y + threadIdx.y;
    int bc = blockIdx.z;
    int c = bc % C;
    if (ow >= W || oh >= H) return;
    const float* xp = x + (long)bc * H * W;
    const float* wp = w + c * KS * KS;
    float acc = 0.0f;
    for (int ky = 0; ky < KS; ++ky) {
        int ih = oh + ky - pad;
        if (ih < 0 || ih >= H) continue;
        for (int kx = 0; kx < KS; ++kx) {
            int iw = ow + kx - pad;
            if (iw < 0 || iw >= W) continue;
            acc += xp[ih * W + iw] * wp[ky * KS + kx];
        }
    }
    y[(long)bc * H * W + oh * W + ow] = acc;
}

torch::Tensor depthwise_conv2d(torch::Tensor x, torch::Tensor w, int pad) {
    int B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), KS = w.size(-1);
    auto y = torch::empty_like(x);
    dim3 block(16, 16);
    dim3 grid((W + 15) / 16, (H + 15) / 16, B * C);
    depthwise_conv2d_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(),
                                             B, C, H, W, KS, pad);
    return y;
}
"""

ext = load_inline(name="dwconv", cpp_sources="torch::Tensor depthwise_conv2d(torch::Tensor x, torch::Tensor w, int pad);",
                  cuda_sources=cuda_source, functions=["depthwise_conv2d"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, channels: int, kernel_size: int = 3):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, 1, kernel_size, kernel_size))
        self.pad = kernel_size // 2

    def forward(self, x):
        return ext.depthwise_conv2d(x, self.weight, self.pad)
