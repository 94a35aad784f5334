import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__device__ void welford_combine(float& mean, float& m2, float& count, float omean, float om2, float ocount) {
    float n = count + ocount;
    if (n == 0.f) return;
    float delta = omean - mean;
    mean += delta * ocount / n;
    m2 += om2 + delta * delta * count * ocount / n;
    count = n;
}

// one warp per row
__global__ void layernorm_welford(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ b,
                                  float* __restrict__ y, int rows, int D, float eps) {
    int row = blockIdx.x * 4 + threadIdx.y;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * D;
    float mean = 0.f, m2 = 0.f, count = 0.f;
    for (int i = threadIdx.x; i < D; i += 32) {
        float v = xr[i];
        count += 1.f;
        float d = v - mean;
        mean += d / count;
        m2 += d * (v - mean);
    }
    for (int o = 16; o > 0; o >>= 1) {
        float om = __shfl_xor_sync(0xffffffff, mean, o);
        float om2 = __shfl_xor_sync(0xffffffff, m2, o);
        float oc = __shfl_xor_sync(0xffffffff, count, o);
        welford_combine(mean, m2, count, om, om2, oc);
    }
    float rstd = rsqrtf(m2 / D + eps);
    for (int i = threadIdx.x; i < D; i += 32) y[(size_t)row * D + i] = (xr[i] - mean) * rstd * g[i] + b[i];
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor g, torch::Tensor b) {
    int D = x.size(-1), rows = x.numel() / D;
    auto y = torch::empty_like(x);
    layernorm_welford<<<(rows + 3) / 4, dim3(32, 4)>>>(x.data_ptr<float>(), g.data_ptr<float>(), b.data_ptr<float>(),
                                                       y.data_ptr<float>(), rows, D, 1e-5f);
    return y;
}
"""
ext = load_inline(name="ln_welford", cpp_sources="torch::Tensor layernorm(torch::Tensor x, torch::Tensor g, torch::Tensor b);",
                  cuda_sources=src, functions=["layernorm"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.ln = nn.LayerNorm(shape)

    def forward(self, x):
        return ext.layernorm(x, self.ln.weight, self.ln.bias)
