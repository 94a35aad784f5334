import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void swish_scale_kernel(const float* __restrict__ x, float* __restrict__ y, float scale, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)blockDim.x * gridDim.x) {
        float v = x[i];
        y[i] = scale * v / (1.0f + expf(-v));
    }
}

torch::Tensor swish_scale(torch::Tensor x, double scale) {
    auto y = torch::empty_like(x);
    swish_scale_kernel<<<264, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)scale, x.numel());
    return y;
}
"""
ext = load_inline(name="swish_scale", cpp_sources="torch::Tensor swish_scale(torch::Tensor x, double scale);",
                  cuda_sources=cuda_src, functions=["swish_scale"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.matmul(x)
        return ext.swish_scale(x, self.scaling_factor)
