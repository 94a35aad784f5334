"""persistent_kernel, before: one short-lived block per 8 rows (262144 blocks).

Every block stages the whole 32 x 32 weight (4 KB) and the bias in shared memory before it computes
8 rows (1 KB of input): four times more L2-to-SM traffic for the weight than for the data, plus a
block launch, a barrier and a ramp-up per 8 rows.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define D 32
#define ROWS_PER_BLOCK 8   // 256 threads: one warp per row, one lane per output column

__global__ void small_linear(const float* __restrict__ x, const float* __restrict__ w,
                             const float* __restrict__ b, float* __restrict__ y, long rows) {
    __shared__ float ws[D][D];
    __shared__ float bs[D];
    for (int i = threadIdx.x; i < D * D; i += blockDim.x) ws[i / D][i % D] = w[i];
    if (threadIdx.x < D) bs[threadIdx.x] = b[threadIdx.x];
    __syncthreads();
    long r = (long)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    int col = threadIdx.x & 31;
    if (r >= rows) return;
    float xv = x[r * D + col];                 // lane k holds x[r, k]
    float acc = bs[col];
#pragma unroll
    for (int k = 0; k < D; ++k) acc = fmaf(__shfl_sync(0xffffffffu, xv, k), ws[k][col], acc);
    y[r * D + col] = acc;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.size(1) == D, "x: rows x 32 float32 CUDA");
    x = x.contiguous();
    long rows = x.size(0);
    auto y = torch::empty_like(x);
    unsigned blocks = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    small_linear<<<blocks, 256>>>(x.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                  b.contiguous().data_ptr<float>(), y.data_ptr<float>(), rows);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="kb_persistent_kernel_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

D = 32


class ModelNew(nn.Module):
    def __init__(self, d: int = D):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.weight, self.bias)
