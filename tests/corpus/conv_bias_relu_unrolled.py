import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#define KS 3

__global__ void conv3x3_bias_relu(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                  float* __restrict__ y, int Cin, int H, int W, int Cout) {
    int ow = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = blockIdx.y * blockDim.y + threadIdx.y;
    int n = blockIdx.z / Cout, oc = blockIdx.z % Cout;
    int OH = H - KS + 1, OW = W - KS + 1;
    if (oh >= OH || ow >= OW) return;
    float acc = b[oc];
    for (int ic = 0; ic < Cin; ++ic) {
        #pragma unroll
        for (int kh = 0; kh < KS; ++kh) {
            #pragma unroll
            for (int kw = 0; kw < KS; ++kw) {
                acc += x[((n * Cin + ic) * H + oh + kh) * W + ow + kw] * w[((oc * Cin + ic) * KS + kh) * KS + kw];
            }
        }
    }
    y[((n * Cout + oc) * OH + oh) * OW + ow] = fmaxf(acc, 0.f);
}

torch::Tensor conv_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3), Cout = w.size(0);
    auto y = torch::empty({N, Cout, H - 2, W - 2}, x.options());
    dim3 block(16, 16), grid((W - 2 + 15) / 16, (H - 2 + 15) / 16, N * Cout);
    conv3x3_bias_relu<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), Cin, H, W, Cout);
    return y;
}
"""
ext = load_inline(name="conv3x3br", cpp_sources="torch::Tensor conv_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
                  cuda_sources=src, functions=["conv_bias_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)

    def forward(self, x):
        return ext.conv_bias_relu(x, self.conv.weight, self.conv.bias)
