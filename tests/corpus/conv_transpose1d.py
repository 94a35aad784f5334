import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

// Transposed 1D convolution (gather form): out[b, oc, o] = sum_ic sum_k x[b, ic, i] * w[ic, oc, k], o = i*stride + k - pad
__global__ void conv_transpose1d_kernel(const float* x, const float* w, float* out, int B, int Cin, int Cout,
                                        int Lin, int Lout, int K, int stride, int pad) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * Cout * Lout) return;
    int o = idx % Lout;
    int oc = (idx / Lout) % Cout;
    int b = idx / (Lout * Cout);
    float acc = 0.f;
    for (int ic = 0; ic < Cin; ++ic) {
        for (int k = 0; k < K; ++k) {
            int t = o + pad - k;
            if (t % stride != 0) continue;
            int i = t / stride;
            if (i < 0 || i >= Lin) continue;
            acc += x[(b * Cin + ic) * Lin + i] * w[(ic * Cout + oc) * K + k];
        }
    }
    out[idx] = acc;
}

torch::Tensor conv_transpose1d(torch::Tensor x, torch::Tensor w, int stride, int pad) {
    int B = x.size(0), Cin = x.size(1), Lin = x.size(2), Cout = w.size(1), K = w.size(2);
    int Lout = (Lin - 1) * stride - 2 * pad + K;
    auto out = torch::empty({B, Cout, Lout}, x.options());
    int total = B * Cout * Lout;
    conv_transpose1d_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(),
                                                        B, Cin, Cout, Lin, Lout, K, stride, pad);
    return out;
}
"""
ext = load_inline(name="convt1d", cpp_sources="torch::Tensor conv_transpose1d(torch::Tensor x, torch::Tensor w, int stride, int pad);",
                  cuda_sources=cuda_src, functions=["conv_transpose1d"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, cin, cout, k, stride=1, padding=0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cin, cout, k))
        self.stride, self.padding = stride, padding

    def forward(self, x):
        return ext.conv_transpose1d(x, self.weight, self.stride, self.padding)
