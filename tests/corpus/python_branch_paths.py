import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void abs_vec_kernel(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        y[i] = make_float4(fabsf(v.x), fabsf(v.y), fabsf(v.z), fabsf(v.w));
    }
}

__global__ void abs_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fabsf(x[i]);
}

torch::Tensor abs_vec(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n4 = x.numel() / 4;
    abs_vec_kernel<<<(n4 + 255) / 256, 256>>>((const float4*)x.data_ptr<float>(), (float4*)y.data_ptr<float>(), n4);
    return y;
}

torch::Tensor abs_scalar(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    abs_scalar_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_src = "torch::Tensor abs_vec(torch::Tensor x);\ntorch::Tensor abs_scalar(torch::Tensor x);"
ext = load_inline(name="abs_paths", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["abs_vec", "abs_scalar"],
                  verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.numel() % 4 == 0:
            return ext.abs_vec(x)
        return ext.abs_scalar(x)
