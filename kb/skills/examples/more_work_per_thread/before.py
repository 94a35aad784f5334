"""more_work_per_thread, before: one element per thread; 2**26 threads each pay the index math, the
bounds check and block scheduling for three loads and one store, with only three loads in flight per
thread."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void fma3_one(const float* __restrict__ a, const float* __restrict__ b,
                         const float* __restrict__ c, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] * b[i] + c[i];
}

torch::Tensor fma3(torch::Tensor a, torch::Tensor b, torch::Tensor c) {
    auto y = torch::empty_like(a);
    long n = a.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    if (n > 0)
        fma3_one<<<(unsigned)blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                c.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor fma3(torch::Tensor a, torch::Tensor b, torch::Tensor c);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_more_work_per_thread_before",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['fma3'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return _ext().fma3(a.contiguous(), b.contiguous(), c.contiguous())
