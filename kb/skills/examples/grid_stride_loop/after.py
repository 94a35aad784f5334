"""grid_stride_loop, after: a grid sized to the machine (SM count x resident blocks per SM from the
occupancy API) and a grid-stride loop with 64-bit indices; any n works, blocks are launched once,
and the loop condition replaces the bounds check."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void silu_gs(const float* __restrict__ x, float* __restrict__ y, long n) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i];
        y[i] = v / (1.0f + expf(-v));
    }
}

torch::Tensor silu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n == 0) return y;
    static int sms = 0, per_sm = 0;
    const int threads = 256;
    if (sms == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, silu_gs, threads, 0);
        if (per_sm < 1) per_sm = 1;
    }
    long blocks = (long)sms * per_sm;
    long need = (n + threads - 1) / threads;
    if (blocks > need) blocks = need;
    silu_gs<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor silu(torch::Tensor x);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_grid_stride_loop_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['silu'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().silu(x.contiguous())
