import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void tanh_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = tanhf(x[i]);
}

torch::Tensor tanh_fwd(torch::Tensor x) {
    auto y = torch::empty_like(x);
    tanh_kernel<<<512, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
ext = load_inline(name="tanh_cat", cpp_sources="torch::Tensor tanh_fwd(torch::Tensor x);", cuda_sources=src,
                  functions=["tanh_fwd"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, a, b):
        x = torch.cat([a, b], dim=1)
        return ext.tanh_fwd(x)
