"""loop_unrolling, after: the width as a template parameter, both loops fully unrolled.

With D known at compile time the row is loaded once into 16 registers (four float4 loads), the weight is
staged in shared memory and read with warp-uniform (broadcast) addresses, the 256 FMAs carry no loop
overhead, and the outputs leave as four float4 stores. The host dispatches D = 16 and keeps the generic
kernel for any other width.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

template <int D>
__global__ void row_matvec_fixed(const float* __restrict__ x, const float* __restrict__ w,
                                 float* __restrict__ y, long rows) {
    __shared__ float ws[D * D];
    for (int i = threadIdx.x; i < D * D; i += blockDim.x) ws[i] = w[i];
    __syncthreads();
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float4* xr = reinterpret_cast<const float4*>(x + r * D);
    float xv[D];
#pragma unroll
    for (int k4 = 0; k4 < D / 4; ++k4) {
        float4 v = xr[k4];
        xv[4 * k4] = v.x; xv[4 * k4 + 1] = v.y; xv[4 * k4 + 2] = v.z; xv[4 * k4 + 3] = v.w;
    }
    float out[D];
#pragma unroll
    for (int j = 0; j < D; ++j) {
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < D; ++k) acc = fmaf(xv[k], ws[j * D + k], acc);
        out[j] = acc;
    }
    float4* yr = reinterpret_cast<float4*>(y + r * D);
#pragma unroll
    for (int j4 = 0; j4 < D / 4; ++j4) yr[j4] = make_float4(out[4 * j4], out[4 * j4 + 1], out[4 * j4 + 2], out[4 * j4 + 3]);
}

__global__ void row_matvec_generic(const float* __restrict__ x, const float* __restrict__ w,
                                   float* __restrict__ y, long rows, int d) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (int j = 0; j < d; ++j) {
        float acc = 0.f;
        for (int k = 0; k < d; ++k) acc += x[r * d + k] * w[j * d + k];
        y[r * d + j] = acc;
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 2, "x: 2-D float32 CUDA");
    x = x.contiguous(); w = w.contiguous();
    long rows = x.size(0);
    int d = x.size(1);
    TORCH_CHECK(w.size(0) == d && w.size(1) == d, "w: d x d");
    auto y = torch::empty_like(x);
    unsigned blocks = (unsigned)((rows + 255) / 256);
    if (d == 16)
        row_matvec_fixed<16><<<blocks, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), rows);
    else
        row_matvec_generic<<<blocks, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), rows, d);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w);"

_ext = load_inline(
    name="kb_loop_unrolling_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

D = 16


class ModelNew(nn.Module):
    def __init__(self, d: int = D):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d) / d ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.weight)
