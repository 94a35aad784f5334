"""Blind-set kernel bl30_softmax_warp_template: a first CUDA version of the task (row softmax for short rows (512); templated warp-per-row kernel, values kept in registers, float4 loads)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

template <int COLS>
__global__ void softmax_warp_kernel(const float* __restrict__ x, float* __restrict__ y, int rows) {
    constexpr int PER_LANE = COLS / 128;  // float4 chunks per lane
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= rows) return;
    const float4* row = reinterpret_cast<const float4*>(x + (long)warp * COLS);
    float4 v[PER_LANE];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        v[i] = row[lane + 32 * i];
        m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        v[i].x = expf(v[i].x - m); v[i].y = expf(v[i].y - m);
        v[i].z = expf(v[i].z - m); v[i].w = expf(v[i].w - m);
        s += v[i].x + v[i].y + v[i].z + v[i].w;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    float inv = 1.f / s;
    float4* out = reinterpret_cast<float4*>(y + (long)warp * COLS);
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        float4 r = v[i];
        r.x *= inv; r.y *= inv; r.z *= inv; r.w *= inv;
        out[lane + 32 * i] = r;
    }
}

torch::Tensor softmax512(torch::Tensor x) {
    TORCH_CHECK(x.size(1) == 512, "this kernel is specialised for 512 columns");
    int rows = x.size(0);
    auto y = torch::empty_like(x);
    int threads = 256;
    int blocks = (rows * 32 + threads - 1) / threads;
    softmax_warp_kernel<512><<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows);
    return y;
}
"""

CPP_SRC = """
torch::Tensor softmax512(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl30_softmax_warp_template",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['softmax512'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.softmax512(x.contiguous())
