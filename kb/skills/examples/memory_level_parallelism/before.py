"""memory_level_parallelism, before: one thread per column walks all 16384 rows. Only 4096 threads (16
blocks) exist, each with a handful of loads in flight, so the bytes in flight are far below
bandwidth x latency and DRAM sits mostly idle."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void colsum_serial(const float* __restrict__ x, float* __restrict__ y, long rows, long cols) {
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float acc = 0.0f;
    for (long r = 0; r < rows; ++r) acc += x[r * cols + c];
    y[c] = acc;
}

torch::Tensor colsum(torch::Tensor x) {
    long rows = x.size(0), cols = x.size(1);
    auto y = torch::empty({cols}, x.options());
    int threads = 256;
    long blocks = (cols + threads - 1) / threads;
    if (cols > 0) colsum_serial<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor colsum(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_memory_level_parallelism_before",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['colsum'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().colsum(x.contiguous())
