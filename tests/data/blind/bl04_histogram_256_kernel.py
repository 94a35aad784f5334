"""Blind-set kernel bl04_histogram_256: a first CUDA version of the task (256-bin histogram of byte-valued codes (counts as float))."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void hist_kernel(const int64_t* codes, int* bins, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&bins[codes[i]], 1);
    }
}

torch::Tensor histogram256(torch::Tensor codes) {
    auto bins = torch::zeros({256}, codes.options().dtype(torch::kInt32));
    long n = codes.numel();
    hist_kernel<<<(n + 511) / 512, 512>>>(codes.data_ptr<int64_t>(), bins.data_ptr<int>(), n);
    return bins.to(torch::kFloat32);
}
"""

CPP_SRC = """
torch::Tensor histogram256(torch::Tensor codes);
"""

_ext = load_inline(
    name="blind_bl04_histogram_256",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['histogram256'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, codes):
        return _ext.histogram256(codes.contiguous())
