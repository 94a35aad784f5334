"""Held-out: index_add along dim 0, out[index[i], :] += src[i, :] for 65536 source rows of 512 fp32
into 4096 destination rows, one thread per source element with a float atomicAdd."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void scatter_add_kernel(const float* src, const long* index, float* out, int n_rows, int dim) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n_rows * dim) {
        int r = idx / dim;
        int d = idx % dim;
        atomicAdd(&out[index[r] * dim + d], src[idx]);
    }
}

torch::Tensor scatter_add_cuda(torch::Tensor out, torch::Tensor index, torch::Tensor src) {
    auto result = out.clone();
    int n_rows = src.size(0), dim = src.size(1);
    int total = n_rows * dim;
    scatter_add_kernel<<<(total + 255) / 256, 256>>>(src.data_ptr<float>(), index.data_ptr<long>(),
                                                     result.data_ptr<float>(), n_rows, dim);
    return result;
}
"""

cpp_source = "torch::Tensor scatter_add_cuda(torch::Tensor out, torch::Tensor index, torch::Tensor src);"

ext = load_inline(name="heldout_scatter_add_atomic", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["scatter_add_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, out: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        return ext.scatter_add_cuda(out.contiguous(), index.contiguous(), src.contiguous())
