"""Blind-set kernel bl19_attention_three_kernels: a first CUDA version of the task (scaled dot-product attention (no mask), fp32: scores kernel, row-softmax kernel, weighted-sum kernel)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void scores_kernel(const float* q, const float* k, float* s, int S, int D, float scale) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y;
    long bh = blockIdx.z;
    if (j >= S) return;
    const float* qi = q + (bh * S + i) * D;
    const float* kj = k + (bh * S + j) * D;
    float acc = 0.f;
    for (int d = 0; d < D; ++d) acc += qi[d] * kj[d];
    s[(bh * S + i) * S + j] = acc * scale;
}

__global__ void softmax_inplace_kernel(float* s, int S, long rows) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float* p = s + r * S;
    float m = -INFINITY;
    for (int j = 0; j < S; ++j) m = fmaxf(m, p[j]);
    float sum = 0.f;
    for (int j = 0; j < S; ++j) { float e = expf(p[j] - m); p[j] = e; sum += e; }
    for (int j = 0; j < S; ++j) p[j] /= sum;
}

__global__ void pv_kernel(const float* p, const float* v, float* o, int S, int D) {
    int d = threadIdx.x;
    int i = blockIdx.x;
    long bh = blockIdx.y;
    const float* pi = p + (bh * S + i) * S;
    const float* vb = v + bh * S * D;
    float acc = 0.f;
    for (int j = 0; j < S; ++j) acc += pi[j] * vb[(long)j * D + d];
    o[(bh * S + i) * D + d] = acc;
}

torch::Tensor attention(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
    int B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
    auto s = torch::empty({B, H, S, S}, q.options());
    auto o = torch::empty_like(q);
    float scale = 1.0f / sqrtf((float)D);
    dim3 g1((S + 127) / 128, S, B * H);
    scores_kernel<<<g1, 128>>>(q.data_ptr<float>(), k.data_ptr<float>(), s.data_ptr<float>(), S, D, scale);
    long rows = (long)B * H * S;
    softmax_inplace_kernel<<<(rows + 127) / 128, 128>>>(s.data_ptr<float>(), S, rows);
    dim3 g3(S, B * H);
    pv_kernel<<<g3, D>>>(s.data_ptr<float>(), v.data_ptr<float>(), o.data_ptr<float>(), S, D);
    return o;
}
"""

CPP_SRC = """
torch::Tensor attention(torch::Tensor q, torch::Tensor k, torch::Tensor v);
"""

_ext = load_inline(
    name="blind_bl19_attention_three_kernels",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['attention'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, q, k, v):
        return _ext.attention(q.contiguous(), k.contiguous(), v.contiguous())
