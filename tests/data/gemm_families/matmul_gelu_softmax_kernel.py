# Plain first kernel: a thread per output of the projection, then a block per row for GELU and softmax.
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>

__global__ void fc_naive(const float* x, const float* w, const float* b, float* y, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += x[row * K + k] * w[col * K + k];
    y[row * N + col] = acc + b[col];
}

__device__ float gelu(float v) { return 0.5f * v * (1.f + erff(v * 0.7071067811865476f)); }

__global__ void gelu_row_softmax(const float* h, float* y, int N) {
    __shared__ float red[256];
    const float* hr = h + (long)blockIdx.x * N;
    float m = -1e30f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) m = fmaxf(m, gelu(hr[i]));
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float t = 0.f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) t += expf(gelu(hr[i]) - m);
    red[threadIdx.x] = t;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.f / red[0];
    for (int i = threadIdx.x; i < N; i += blockDim.x) y[(long)blockIdx.x * N + i] = expf(gelu(hr[i]) - m) * inv;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto h = torch::empty({M, N}, x.options());
    dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
    fc_naive<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), h.data_ptr<float>(), M, N, K);
    auto y = torch::empty_like(h);
    gelu_row_softmax<<<M, 256>>>(h.data_ptr<float>(), y.data_ptr<float>(), N);
    return y;
}
"""
CPP = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"
ext = load_inline(name="fam_matmul_gelu_softmax", cpp_sources=CPP, cuda_sources=CUDA, functions=["forward"])


class ModelNew(torch.nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = torch.nn.Linear(d_in, d_out)

    def forward(self, x):
        return ext.forward(x.contiguous(), self.fc.weight, self.fc.bias)
