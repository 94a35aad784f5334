import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void square_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}

__global__ void add_scalar_kernel(float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += s;
}

torch::Tensor square(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    square_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}

torch::Tensor add_scalar(torch::Tensor y, double s) {
    int n = y.numel();
    add_scalar_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), (float)s, n);
    return y;
}
"""
cpp_src = """
torch::Tensor square(torch::Tensor x);
torch::Tensor add_scalar(torch::Tensor y, double s);
"""
ext = load_inline(name="sq_add", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["square", "add_scalar"],
                  verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        y = ext.square(x)
        torch.cuda.synchronize()
        return ext.add_scalar(y, 1.0)
