"""launch_overhead_reduction, after: one call, one allocation and one launch for all tensors.

The host packs up to 64 (input, output, length) triples and a block-offset table into a kernel
parameter struct (passed by value, ~2.6 KB, well under the 4 KB parameter limit); each block finds its
tensor in that table once. The outputs are views of one flat buffer.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#include <math.h>
#include <vector>

#define MAXT 64
#define THREADS 256
#define PER_BLOCK (THREADS * 4)

struct Batch {
    const float* x[MAXT];
    float* y[MAXT];
    long long n[MAXT];
    int block_start[MAXT + 1];
    int count;
};

__global__ void silu_multi_kernel(const Batch batch) {
    int b = blockIdx.x, t = 0;
    while (t + 1 < batch.count && batch.block_start[t + 1] <= b) ++t;   // uniform per block
    long long base = (long long)(b - batch.block_start[t]) * PER_BLOCK;
    const float* x = batch.x[t];
    float* y = batch.y[t];
    long long n = batch.n[t];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        long long i = base + j * THREADS + threadIdx.x;
        if (i < n) { float v = x[i]; y[i] = v / (1.f + expf(-v)); }
    }
}

std::vector<torch::Tensor> silu_multi(std::vector<torch::Tensor> xs) {
    std::vector<torch::Tensor> outs;
    if (xs.empty()) return outs;
    long long total = 0;
    for (auto& x : xs) {
        TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.is_contiguous(), "contiguous float32 CUDA tensors");
        total += x.numel();
    }
    auto flat = torch::empty({total}, xs[0].options());
    long long off = 0;
    for (auto& x : xs) { outs.push_back(flat.narrow(0, off, x.numel()).view(x.sizes())); off += x.numel(); }
    for (size_t first = 0; first < xs.size(); first += MAXT) {
        Batch batch;
        batch.count = (int)std::min<size_t>(MAXT, xs.size() - first);
        int blocks = 0;
        for (int t = 0; t < batch.count; ++t) {
            auto& x = xs[first + t];
            batch.x[t] = x.data_ptr<float>();
            batch.y[t] = outs[first + t].data_ptr<float>();
            batch.n[t] = x.numel();
            batch.block_start[t] = blocks;
            blocks += (int)((x.numel() + PER_BLOCK - 1) / PER_BLOCK);
        }
        batch.block_start[batch.count] = blocks;
        if (blocks) silu_multi_kernel<<<blocks, THREADS>>>(batch);
    }
    return outs;
}
"""

CPP_SRC = "#include <vector>\nstd::vector<torch::Tensor> silu_multi(std::vector<torch::Tensor> xs);"

_ext = load_inline(
    name="kb_launch_overhead_reduction_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["silu_multi"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, *xs: torch.Tensor):
        return tuple(_ext.silu_multi([x.contiguous() for x in xs]))
