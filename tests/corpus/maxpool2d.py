import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cfloat>

__global__ void maxpool2d_kernel(const float* __restrict__ in, float* __restrict__ out, int NC, int H, int W,
                                 int out_h, int out_w, int kernel_size, int stride) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= NC * out_h * out_w) return;
    int ow = idx % out_w;
    int oh = (idx / out_w) % out_h;
    int nc = idx / (out_w * out_h);
    float best = -FLT_MAX;
    for (int kh = 0; kh < kernel_size; ++kh) {
        for (int kw = 0; kw < kernel_size; ++kw) {
            int ih = oh * stride + kh;
            int iw = ow * stride + kw;
            if (ih < H && iw < W) best = fmaxf(best, in[((long)nc * H + ih) * W + iw]);
        }
    }
    out[idx] = best;
}

torch::Tensor maxpool2d(torch::Tensor x, int kernel_size, int stride) {
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    int out_h = (H - kernel_size) / stride + 1, out_w = (W - kernel_size) / stride + 1;
    auto y = torch::empty({N, C, out_h, out_w}, x.options());
    int total = N * C * out_h * out_w;
    maxpool2d_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), N * C, H, W,
                                                 out_h, out_w, kernel_size, stride);
    return y;
}
"""

ext = load_inline(name="maxpool2d_k", cpp_sources="torch::Tensor maxpool2d(torch::Tensor x, int kernel_size, int stride);",
                  cuda_sources=cuda_source, functions=["maxpool2d"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride

    def forward(self, x):
        return ext.maxpool2d(x, self.kernel_size, self.stride)
