import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void threshold_kernel(const float* __restrict__ x, float* __restrict__ y, float t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > t ? x[i] : 0.f;
}

__global__ void scale_kernel(float* __restrict__ y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= s;
}

torch::Tensor threshold(torch::Tensor x, double t) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    threshold_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)t, n);
    return y;
}

torch::Tensor scale_(torch::Tensor y, double s) {
    int n = y.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), (float)s, n);
    return y;
}
"""
ext = load_inline(name="thr_scale", cpp_sources="torch::Tensor threshold(torch::Tensor x, double t);\ntorch::Tensor scale_(torch::Tensor y, double s);",
                  cuda_sources=src, functions=["threshold", "scale_"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        y = ext.threshold(x, 0.1)
        stats = y.cpu()
        return ext.scale_(y, 1.0 / (1.0 + float(stats.numel())))
