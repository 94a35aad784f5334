"""atomic_privatization, after: each block keeps a private histogram in shared memory (fast shared
atomics, contention only inside the block), walks a grid-stride range, and merges with one global
atomic per non-empty bin per block: ~1000 x 256 global atomics instead of 2**26. Integer counts are
exact; bins beyond the shared-memory budget fall back to global atomics."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__device__ __forceinline__ int bin_of(float v, int bins, float lo, float hi) {
    if (!(v >= lo && v <= hi)) return -1;      // outside the range (and NaN): ignored, as torch.histc
    int b = (int)((v - lo) * bins / (hi - lo));
    return b == bins ? bins - 1 : b;           // v == hi lands in the last bin
}

__global__ void hist_private(const float* __restrict__ x, float* __restrict__ h, long n,
                             int bins, float lo, float hi) {
    extern __shared__ unsigned int sh[];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) sh[b] = 0u;
    __syncthreads();
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride) {
        int b = bin_of(x[i], bins, lo, hi);
        if (b >= 0) atomicAdd(sh + b, 1u);     // shared-memory atomic: stays on the SM
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        unsigned int c = sh[b];
        if (c) atomicAdd(h + b, (float)c);     // one global atomic per bin per block
    }
}

__global__ void hist_global(const float* __restrict__ x, float* __restrict__ h, long n,
                            int bins, float lo, float hi) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride) {
        int b = bin_of(x[i], bins, lo, hi);
        if (b >= 0) atomicAdd(h + b, 1.0f);
    }
}

torch::Tensor histc(torch::Tensor x, int64_t bins, double lo, double hi) {
    auto h = torch::zeros({bins}, x.options());
    long n = x.numel();
    if (n == 0) return h;
    const int threads = 512;
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    }
    long blocks = (long)sms * 4;               // enough blocks to fill the GPU, few merges
    long need = (n + threads - 1) / threads;
    if (blocks > need) blocks = need;
    size_t smem = (size_t)bins * sizeof(unsigned int);
    if (smem <= 48 * 1024) {
        hist_private<<<(unsigned)blocks, threads, smem>>>(x.data_ptr<float>(), h.data_ptr<float>(), n,
                                                          (int)bins, (float)lo, (float)hi);
    } else {
        hist_global<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), h.data_ptr<float>(), n,
                                                   (int)bins, (float)lo, (float)hi);
    }
    return h;
}
"""

CPP_SRC = "torch::Tensor histc(torch::Tensor x, int64_t bins, double lo, double hi);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_atomic_privatization_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['histc'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self, bins: int = 256, lo: float = 0.0, hi: float = 1.0) -> None:
        super().__init__()
        self.bins, self.lo, self.hi = bins, lo, hi
        _ext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext().histc(x.contiguous(), self.bins, self.lo, self.hi)
