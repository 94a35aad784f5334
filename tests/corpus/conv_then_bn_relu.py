import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = """
#include <torch/extension.h>

__global__ void bn_relu_kernel(const float* x, const float* mean, const float* var, const float* gamma,
                               const float* beta, float* y, int C, int HW, int total, float eps) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total) {
        int c = (idx / HW) % C;
        float v = (x[idx] - mean[c]) * rsqrtf(var[c] + eps) * gamma[c] + beta[c];
        y[idx] = v > 0.f ? v : 0.f;
    }
}

torch::Tensor bn_relu(torch::Tensor x, torch::Tensor mean, torch::Tensor var, torch::Tensor gamma, torch::Tensor beta) {
    auto y = torch::empty_like(x);
    int C = x.size(1), HW = x.size(2) * x.size(3), total = x.numel();
    bn_relu_kernel<<<(total + 511) / 512, 512>>>(x.data_ptr<float>(), mean.data_ptr<float>(), var.data_ptr<float>(),
        gamma.data_ptr<float>(), beta.data_ptr<float>(), y.data_ptr<float>(), C, HW, total, 1e-5f);
    return y;
}
"""
cpp_src = "torch::Tensor bn_relu(torch::Tensor x, torch::Tensor mean, torch::Tensor var, torch::Tensor gamma, torch::Tensor beta);"
bn = load_inline(name="bn_relu", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["bn_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = self.conv(x)
        return bn.bn_relu(x, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias)
