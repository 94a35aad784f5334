"""Blind-set kernel bl18_maxpool2x2: a first CUDA version of the task (2x2 max pooling, stride 2, NCHW; one thread per output)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void maxpool2_kernel(const float* x, float* y, int H, int W, long total) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int OW = W / 2, OH = H / 2;
    int ow = idx % OW;
    int oh = (idx / OW) % OH;
    long plane = idx / ((long)OW * OH);
    const float* p = x + plane * H * W + (2 * oh) * W + 2 * ow;
    y[idx] = fmaxf(fmaxf(p[0], p[1]), fmaxf(p[W], p[W + 1]));
}

torch::Tensor maxpool2(torch::Tensor x) {
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    auto y = torch::empty({N, C, H / 2, W / 2}, x.options());
    long total = y.numel();
    maxpool2_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), H, W, total);
    return y;
}
"""

CPP_SRC = """
torch::Tensor maxpool2(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl18_maxpool2x2",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['maxpool2'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.maxpool2(x.contiguous())
