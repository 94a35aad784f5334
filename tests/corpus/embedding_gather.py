import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void embedding_kernel(const long* __restrict__ ids, const float* __restrict__ table,
                                 float* __restrict__ out, int num_tokens, int dim) {
    int t = blockIdx.x;
    if (t >= num_tokens) return;
    long row = ids[t];
    for (int d = threadIdx.x; d < dim; d += blockDim.x) {
        out[(long)t * dim + d] = table[row * dim + d];
    }
}

torch::Tensor embedding(torch::Tensor ids, torch::Tensor table) {
    int num_tokens = ids.numel();
    int dim = table.size(1);
    auto out = torch::empty({num_tokens, dim}, table.options());
    embedding_kernel<<<num_tokens, 128>>>(ids.data_ptr<long>(), table.data_ptr<float>(), out.data_ptr<float>(),
                                          num_tokens, dim);
    return out;
}
"""

ext = load_inline(name="embedding_gather", cpp_sources="torch::Tensor embedding(torch::Tensor ids, torch::Tensor table);",
                  cuda_sources=cuda_source, functions=["embedding"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(num_embeddings, dim))

    def forward(self, ids):
        return ext.embedding(ids, self.weight)
