import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void weighted_rows_kernel(const float* __restrict__ rows, const float* __restrict__ w, float* __restrict__ out,
                                     int R, int D) {
    int r = blockIdx.x, d = threadIdx.x;
    if (r < R && d < D) out[r * D + d] = rows[r * D + d] * w[r];
}

torch::Tensor weighted_rows(torch::Tensor rows, torch::Tensor w) {
    auto out = torch::empty_like(rows);
    weighted_rows_kernel<<<rows.size(0), rows.size(1)>>>(rows.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(),
                                                        rows.size(0), rows.size(1));
    return out;
}
"""
ext = load_inline(name="weighted_rows", cpp_sources="torch::Tensor weighted_rows(torch::Tensor rows, torch::Tensor w);",
                  cuda_sources=cuda_src, functions=["weighted_rows"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, table, idx, w):
        rows = torch.index_select(table, 0, idx)
        return ext.weighted_rows(rows, w)
