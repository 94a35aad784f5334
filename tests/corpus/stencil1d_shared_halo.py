import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#define RADIUS 3
#define BLOCK 256

__constant__ float coeff[2 * RADIUS + 1];

__global__ void stencil1d_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float temp[BLOCK + 2 * RADIUS];
    int g = blockIdx.x * BLOCK + threadIdx.x;
    int l = threadIdx.x + RADIUS;
    temp[l] = (g < n) ? in[g] : 0.f;
    if (threadIdx.x < RADIUS) {
        temp[l - RADIUS] = (g - RADIUS >= 0) ? in[g - RADIUS] : 0.f;
        temp[l + BLOCK] = (g + BLOCK < n) ? in[g + BLOCK] : 0.f;
    }
    __syncthreads();
    if (g < n) {
        float r = 0.f;
        for (int o = -RADIUS; o <= RADIUS; ++o) r += coeff[o + RADIUS] * temp[l + o];
        out[g] = r;
    }
}

void set_coeff(torch::Tensor c) { cudaMemcpyToSymbol(coeff, c.data_ptr<float>(), (2 * RADIUS + 1) * sizeof(float)); }

torch::Tensor stencil1d(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    stencil1d_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_src = "void set_coeff(torch::Tensor c);\ntorch::Tensor stencil1d(torch::Tensor x);"
ext = load_inline(name="stencil1d", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["set_coeff", "stencil1d"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        ext.set_coeff(torch.tensor([0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05]).cuda())

    def forward(self, x):
        return ext.stencil1d(x)
