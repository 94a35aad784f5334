"""Blind-set kernel bl25_row_max_scale_smem_row: a first CUDA version of the task (divide each row by its max |x|; the whole row (16K floats, 64 KB) is staged in dynamic shared memory by 128 threads)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void row_absmax_scale_kernel(const float* x, float* y, int cols) {
    extern __shared__ float rowbuf[];
    __shared__ float warpmax[4];
    const float* row = x + (long)blockIdx.x * cols;
    float m = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = row[c];
        rowbuf[c] = v;
        m = fmaxf(m, fabsf(v));
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if (threadIdx.x % 32 == 0) warpmax[threadIdx.x / 32] = m;
    __syncthreads();
    m = fmaxf(fmaxf(warpmax[0], warpmax[1]), fmaxf(warpmax[2], warpmax[3]));
    float inv = 1.f / m;
    float* out = y + (long)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = rowbuf[c] * inv;
}

torch::Tensor row_absmax_scale(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    size_t smem = (size_t)cols * sizeof(float);
    cudaFuncSetAttribute(row_absmax_scale_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    row_absmax_scale_kernel<<<rows, 128, smem>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

CPP_SRC = """
torch::Tensor row_absmax_scale(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl25_row_max_scale_smem_row",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['row_absmax_scale'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.row_absmax_scale(x.contiguous())
