import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#define BLOCK 256
#define MAX_K 31

// Single-channel 1D convolution (signal filtering): one block stages BLOCK + K - 1 inputs.
__global__ void conv1d_halo_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                   float* __restrict__ y, int L, int K) {
    __shared__ float tile[BLOCK + MAX_K - 1];
    int out_start = blockIdx.x * BLOCK;
    int radius = K / 2;
    for (int i = threadIdx.x; i < BLOCK + K - 1; i += blockDim.x) {
        int g = out_start + i - radius;
        tile[i] = (g >= 0 && g < L) ? x[g] : 0.0f;
    }
    __syncthreads();
    int o = out_start + threadIdx.x;
    if (o < L) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += w[k] * tile[threadIdx.x + k];
        }
        y[o] = acc;
    }
}

torch::Tensor conv1d_halo(torch::Tensor x, torch::Tensor w) {
    int L = x.numel(), K = w.numel();
    TORCH_CHECK(K <= MAX_K, "kernel too long");
    auto y = torch::empty_like(x);
    conv1d_halo_kernel<<<(L + BLOCK - 1) / BLOCK, BLOCK>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                         y.data_ptr<float>(), L, K);
    return y;
}
"""

ext = load_inline(name="conv1d_halo", cpp_sources="torch::Tensor conv1d_halo(torch::Tensor x, torch::Tensor w);",
                  cuda_sources=cuda_source, functions=["conv1d_halo"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(kernel_size))

    def forward(self, x):
        return ext.conv1d_halo(x, self.weight)
