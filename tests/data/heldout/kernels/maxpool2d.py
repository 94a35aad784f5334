"""Held-out: 2x2 max pooling with stride 2, NCHW fp32 (N=32, C=64, H=W=256), one thread per output
reading its window from global memory (KernelBench L1 "Max_Pooling_2D")."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void maxpool2d_kernel(const float* x, float* y, int NC, int H, int W, int OH, int OW) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < NC * OH * OW) {
        int ow = idx % OW;
        int oh = (idx / OW) % OH;
        int nc = idx / (OW * OH);
        const float* plane = x + (long)nc * H * W;
        float m = -INFINITY;
        for (int kh = 0; kh < 2; ++kh) {
            for (int kw = 0; kw < 2; ++kw) {
                int ih = oh * 2 + kh;
                int iw = ow * 2 + kw;
                m = fmaxf(m, plane[ih * W + iw]);
            }
        }
        y[idx] = m;
    }
}

torch::Tensor maxpool2d_cuda(torch::Tensor x) {
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    int OH = H / 2, OW = W / 2;
    auto y = torch::empty({N, C, OH, OW}, x.options());
    int total = N * C * OH * OW;
    maxpool2d_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), N * C, H, W, OH, OW);
    return y;
}
"""

cpp_source = "torch::Tensor maxpool2d_cuda(torch::Tensor x);"

ext = load_inline(name="heldout_maxpool2d", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["maxpool2d_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.maxpool2d_cuda(x.contiguous())
