import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

#define ELEMS_PER_THREAD 4

__global__ void scale_shift_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   float scale, float shift, int n) {
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * ELEMS_PER_THREAD;
    #pragma unroll
    for (int j = 0; j < ELEMS_PER_THREAD; ++j) {
        int idx = base + j;
        if (idx < n) {
            y[idx] = x[idx] * scale + shift;
        }
    }
}

torch::Tensor scale_shift(torch::Tensor x, double scale, double shift) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    int threads = 256;
    int blocks = (n + threads * ELEMS_PER_THREAD - 1) / (threads * ELEMS_PER_THREAD);
    scale_shift_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)scale, (float)shift, n);
    return y;
}
"""

cpp_source = "torch::Tensor scale_shift(torch::Tensor x, double scale, double shift);"

module = load_inline(name="scale_shift_unrolled", cpp_sources=cpp_source, cuda_sources=cuda_source,
                     functions=["scale_shift"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, scale: float = 2.0, shift: float = 0.5):
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x):
        return module.scale_shift(x, self.scale, self.shift)
