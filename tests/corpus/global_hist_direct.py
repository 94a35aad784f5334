import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void hist_float_kernel(const float* __restrict__ x, int* __restrict__ hist, int n, int bins, float lo, float hi) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        if (v >= lo && v < hi) atomicAdd(&hist[(int)((v - lo) / (hi - lo) * bins)], 1);
    }
}

torch::Tensor histc(torch::Tensor x, int64_t bins, double lo, double hi) {
    auto hist = torch::zeros({bins}, x.options().dtype(torch::kInt32));
    int n = x.numel();
    hist_float_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), hist.data_ptr<int>(), n, bins, (float)lo, (float)hi);
    return hist;
}
"""
ext = load_inline(name="histc_direct", cpp_sources="torch::Tensor histc(torch::Tensor x, int64_t bins, double lo, double hi);",
                  cuda_sources=src, functions=["histc"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.histc(x, 100, 0.0, 1.0)
