"""Blind-set kernel bl36_bmm8_per_thread: a first CUDA version of the task (batched 8x8 matrix products (A_i @ B_i for a million pairs); each thread loads both matrices into registers)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void bmm8_kernel(const float* A, const float* B, float* C, int batch) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= batch) return;
    float a[64], b[64];
    const float* pa = A + (long)i * 64;
    const float* pb = B + (long)i * 64;
#pragma unroll
    for (int k = 0; k < 64; ++k) { a[k] = pa[k]; b[k] = pb[k]; }
    float* pc = C + (long)i * 64;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            float s = 0.f;
#pragma unroll
            for (int k = 0; k < 8; ++k) s += a[r * 8 + k] * b[k * 8 + c];
            pc[r * 8 + c] = s;
        }
    }
}

torch::Tensor bmm8(torch::Tensor a, torch::Tensor b) {
    int batch = a.size(0);
    auto c = torch::empty_like(a);
    bmm8_kernel<<<(batch + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), batch);
    return c;
}
"""

CPP_SRC = """
torch::Tensor bmm8(torch::Tensor a, torch::Tensor b);
"""

_ext = load_inline(
    name="blind_bl36_bmm8_per_thread",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['bmm8'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.bmm8(a.contiguous(), b.contiguous())
