"""memory_level_parallelism, after: the row range is split over gridDim.y slabs so ~64x more threads
stream at once, each thread keeps 4 independent accumulators so 4 loads are in flight per iteration,
and a tiny second kernel adds the per-slab partials (deterministic, no atomics)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void colsum_partial(const float* __restrict__ x, float* __restrict__ part,
                               long rows, long cols, long chunk) {
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    long r0 = blockIdx.y * chunk;
    long r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    long r = r0;
    for (; r + 3 < r1; r += 4) {               // 4 independent loads before any add depends on them
        float v0 = x[r * cols + c];
        float v1 = x[(r + 1) * cols + c];
        float v2 = x[(r + 2) * cols + c];
        float v3 = x[(r + 3) * cols + c];
        a0 += v0; a1 += v1; a2 += v2; a3 += v3;
    }
    for (; r < r1; ++r) a0 += x[r * cols + c];
    part[blockIdx.y * cols + c] = (a0 + a1) + (a2 + a3);
}

__global__ void colsum_finish(const float* __restrict__ part, float* __restrict__ y, long slabs, long cols) {
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float acc = 0.f;
    for (long s = 0; s < slabs; ++s) acc += part[s * cols + c];
    y[c] = acc;
}

torch::Tensor colsum(torch::Tensor x) {
    long rows = x.size(0), cols = x.size(1);
    auto y = torch::empty({cols}, x.options());
    if (cols == 0) return y;
    int threads = 256;
    long bx = (cols + threads - 1) / threads;
    // aim for ~2 waves of 2048 threads per SM over 132 SMs; at least 64 rows per slab
    long target_threads = 132L * 2048L * 2L;
    long slabs = target_threads / (bx * threads);
    if (slabs < 1) slabs = 1;
    long max_slabs = (rows + 63) / 64;
    if (slabs > max_slabs) slabs = max_slabs > 0 ? max_slabs : 1;
    if (slabs > 65535) slabs = 65535;
    long chunk = (rows + slabs - 1) / slabs;
    if (chunk < 1) chunk = 1;
    slabs = (rows + chunk - 1) / chunk;
    if (slabs < 1) slabs = 1;
    auto part = torch::empty({slabs, cols}, x.options());
    if (rows > 0) {
        colsum_partial<<<dim3((unsigned)bx, (unsigned)slabs), threads>>>(x.data_ptr<float>(), part.data_ptr<float>(),
                                                                       rows, cols, chunk);
        colsum_finish<<<(unsigned)bx, threads>>>(part.data_ptr<float>(), y.data_ptr<float>(), slabs, cols);
    } else {
        colsum_finish<<<(unsigned)bx, threads>>>(part.data_ptr<float>(), y.data_ptr<float>(), 0, cols);
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor colsum(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_memory_level_parallelism_after",
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
