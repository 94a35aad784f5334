# Plain first kernel: a direct convolution (a thread per output, loops over input channels and the
# 3x3 window), then an elementwise kernel for the ReLU and the extra bias.
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>

__global__ void conv3x3_direct(const float* x, const float* w, const float* b, float* y,
                               int N, int C, int H, int W, int K) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long total = (long)N * K * H * W;
    if (idx >= total) return;
    int ow = idx % W, oh = (idx / W) % H, ko = (idx / ((long)W * H)) % K, n = idx / ((long)W * H * K);
    float acc = b[ko];
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s) {
                int ih = oh + r - 1, iw = ow + s - 1;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                    acc += x[(((long)n * C + c) * H + ih) * W + iw] * w[((ko * C + c) * 3 + r) * 3 + s];
            }
    y[idx] = acc;
}

__global__ void relu_add_channel(const float* h, const float* extra, float* y, int K, int HW, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(h[i], 0.f) + extra[(i / HW) % K];
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor extra) {
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), K = w.size(0);
    auto h = torch::empty({N, K, H, W}, x.options());
    long total = h.numel();
    conv3x3_direct<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                                  h.data_ptr<float>(), N, C, H, W, K);
    auto y = torch::empty_like(h);
    relu_add_channel<<<(total + 255) / 256, 256>>>(h.data_ptr<float>(), extra.data_ptr<float>(), y.data_ptr<float>(),
                                                    K, H * W, total);
    return y;
}
"""
CPP = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor extra);"
ext = load_inline(name="fam_conv2d_relu_biasadd", cpp_sources=CPP, cuda_sources=CUDA, functions=["forward"])


class ModelNew(torch.nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = torch.nn.Conv2d(c_in, c_out, kernel_size=3, padding=1)
        self.extra = torch.nn.Parameter(torch.randn(c_out, 1, 1) * 0.1)

    def forward(self, x):
        return ext.forward(x.contiguous(), self.conv.weight, self.conv.bias, self.extra.view(-1))
