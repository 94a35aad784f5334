import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void where_kernel(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c,
                             float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = c[i] > 0.5f ? a[i] : b[i];
}

torch::Tensor where(torch::Tensor cond, torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    where_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), cond.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
ext = load_inline(name="where_k", cpp_sources="torch::Tensor where(torch::Tensor cond, torch::Tensor a, torch::Tensor b);",
                  cuda_sources=src, functions=["where"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, cond, a, b):
        return ext.where(cond, a, b)
