"""algebraic_simplification, after: use linearity. sum_j (x W^T + b)[r, j] = x[r, :] . (sum_j W[j, :]) + sum(b).

A tiny kernel collapses W to its column sums (4 MB read), then one memory-bound GEMV reads x once:
34 GFLOP become 34 MFLOP. The summation order changes (fp32 reassociation), well inside tolerance.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

// v[k] = sum_j W[j, k] (column sums of the N x K weight), v[K] = sum_j b[j]. A block owns 32 columns
// (coalesced across lanes); its 8 warps each sum a slice of the rows, then shared memory adds the slices
// in a fixed order. 1024 x 1024 is 4 MB: a few microseconds.
__global__ void collapse_weight(const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ v,
                                int N, int K) {
    __shared__ float part[8][33];
    int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;
    int k = blockIdx.x * 32 + lane;
    float s = 0.f;
    if (k < K)
        for (int j = slice; j < N; j += 8) s += w[(size_t)j * K + k];
    part[slice][lane] = s;
    __syncthreads();
    if (slice == 0 && k < K) {
        float t = 0.f;
        for (int q = 0; q < 8; ++q) t += part[q][lane];
        v[k] = t;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float t = 0.f;
        for (int j = 0; j < N; ++j) t += b[j];
        v[K] = t;
    }
}

// out[r] = dot(x[r, :], v) + v[K]: one warp per row, float4 loads (K % 4 == 0)
__global__ void gemv_rows(const float* __restrict__ x, const float* __restrict__ v, float* __restrict__ out,
                          int rows, int K) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)r * K);
    const float4* v4 = reinterpret_cast<const float4*>(v);
    float s = 0.f;
    for (int j = lane; j < K / 4; j += 32) {
        float4 a = xr[j], c = v4[j];
        s += a.x * c.x + a.y * c.y + a.z * c.z + a.w * c.w;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) out[r] = s + v[K];
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32, "float32 CUDA");
    x = x.contiguous(); w = w.contiguous(); b = b.contiguous();
    int M = x.size(0), K = x.size(1), N = w.size(0);
    TORCH_CHECK(w.size(1) == K && K % 4 == 0, "K must be a multiple of 4");
    auto v = torch::empty({K + 4}, x.options());   // padded so v is 16-byte aligned and holds sum(b) at [K]
    collapse_weight<<<(K + 31) / 32, 256>>>(w.data_ptr<float>(), b.data_ptr<float>(), v.data_ptr<float>(), N, K);
    auto out = torch::empty({M, 1}, x.options());
    gemv_rows<<<(M + 7) / 8, 256>>>(x.data_ptr<float>(), v.data_ptr<float>(), out.data_ptr<float>(), M, K);
    return out;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="kb_algebraic_simplification_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.linear.weight, self.linear.bias)
