"""kernel_fission, after: split into three kernels, each with the launch its phase wants: per-slab
column partial sums over a 2-D grid, a tiny finishing kernel, and an elementwise rescale over all
rows x cols with one coalesced thread per element. Two extra launches (~10 us) buy full-GPU
parallelism."""

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
    float a0 = 0.f, a1 = 0.f;
    long r = r0;
    for (; r + 1 < r1; r += 2) { a0 += x[r * cols + c]; a1 += x[(r + 1) * cols + c]; }
    if (r < r1) a0 += x[r * cols + c];
    part[blockIdx.y * cols + c] = a0 + a1;
}

__global__ void colsum_finish(const float* __restrict__ part, float* __restrict__ s, long slabs, long cols) {
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float acc = 0.f;
    for (long k = 0; k < slabs; ++k) acc += part[k * cols + c];
    s[c] = acc;
}

__global__ void rescale(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y,
                        long rows, long cols) {
    for (long r = blockIdx.y; r < rows; r += gridDim.y)
        for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < cols; c += (long)gridDim.x * blockDim.x)
            y[r * cols + c] = x[r * cols + c] / __ldg(s + c);
}

torch::Tensor colnorm(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    int threads = 256;
    long bx = (cols + threads - 1) / threads;
    long slabs = (132L * 2048L * 2L) / (bx * threads);
    if (slabs < 1) slabs = 1;
    if (slabs > (rows + 31) / 32) slabs = (rows + 31) / 32;
    if (slabs > 65535) slabs = 65535;
    long chunk = (rows + slabs - 1) / slabs;
    slabs = (rows + chunk - 1) / chunk;
    auto part = torch::empty({slabs, cols}, x.options());
    auto s = torch::empty({cols}, x.options());
    colsum_partial<<<dim3((unsigned)bx, (unsigned)slabs), threads>>>(x.data_ptr<float>(), part.data_ptr<float>(),
                                                                   rows, cols, chunk);
    colsum_finish<<<(unsigned)bx, threads>>>(part.data_ptr<float>(), s.data_ptr<float>(), slabs, cols);
    long gy = rows < 65535 ? rows : 65535;
    long gx = bx < 64 ? bx : 64;
    rescale<<<dim3((unsigned)gx, (unsigned)gy), threads>>>(x.data_ptr<float>(), s.data_ptr<float>(),
                                                         y.data_ptr<float>(), rows, cols);
    return y;
}
"""

CPP_SRC = "torch::Tensor colnorm(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_kernel_fission_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['colnorm'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().colnorm(x.contiguous())
