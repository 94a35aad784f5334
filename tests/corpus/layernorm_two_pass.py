import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__device__ float block_sum(float v, float* shared) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if (lane == 0) shared[wid] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? shared[lane] : 0.0f;
    if (wid == 0) for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if (threadIdx.x == 0) shared[0] = v;
    __syncthreads();
    float r = shared[0];
    __syncthreads();
    return r;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int D, float eps) {
    __shared__ float scratch[32];
    const float* xr = x + (long)blockIdx.x * D;
    float* yr = y + (long)blockIdx.x * D;
    float s = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) s += xr[i];
    float mean = block_sum(s, scratch) / D;
    float v = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float d = xr[i] - mean;
        v += d * d;
    }
    float rstd = rsqrtf(block_sum(v, scratch) / D + eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
    }
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
    int D = gamma.numel();
    int rows = x.numel() / D;
    auto y = torch::empty_like(x);
    layernorm_kernel<<<rows, 256>>>(x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                    y.data_ptr<float>(), D, (float)eps);
    return y;
}
"""

ext = load_inline(name="layernorm_tp",
                  cpp_sources="torch::Tensor layernorm(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps);",
                  cuda_sources=cuda_source, functions=["layernorm"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return ext.layernorm(x, self.weight, self.bias, 1e-5)
