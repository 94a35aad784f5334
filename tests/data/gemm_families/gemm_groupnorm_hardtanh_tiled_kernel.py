# Plain first kernel: a 16x16 shared-memory tiled GEMM for the Linear,
# then one block per (row, group) for the statistics, the affine map and the clamp.
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>

#define T 16
__global__ void dense_tiled(const float* x, const float* w, const float* b, float* y, int M, int N, int K) {
    __shared__ float xs[T][T];
    __shared__ float ws[T][T + 1];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    int wrow = blockIdx.x * T + threadIdx.y;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        int k = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && k < K) ? x[(long)row * K + k] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (wrow < N && k < K) ? w[(long)wrow * K + k] : 0.f;
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) acc += xs[threadIdx.y][kk] * ws[threadIdx.x][kk];
        __syncthreads();
    }
    if (row < M && col < N) y[(long)row * N + col] = acc + b[col];
}

__global__ void groupnorm_clamp(const float* h, const float* gamma, const float* beta, float* y,
                                int C, int G, float eps, float lo, float hi) {
    __shared__ float s1[256], s2[256];
    int row = blockIdx.x / G, g = blockIdx.x % G, cg = C / G;
    const float* hr = h + (long)row * C + g * cg;
    float a = 0.f, q = 0.f;
    for (int i = threadIdx.x; i < cg; i += blockDim.x) { float v = hr[i]; a += v; q += v * v; }
    s1[threadIdx.x] = a; s2[threadIdx.x] = q;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) { s1[threadIdx.x] += s1[threadIdx.x + s]; s2[threadIdx.x] += s2[threadIdx.x + s]; }
        __syncthreads();
    }
    float mean = s1[0] / cg, inv = rsqrtf(s2[0] / cg - mean * mean + eps);
    for (int i = threadIdx.x; i < cg; i += blockDim.x) {
        int c = g * cg + i;
        y[(long)row * C + c] = fminf(fmaxf((hr[i] - mean) * inv * gamma[c] + beta[c], lo), hi);
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma, torch::Tensor beta,
                      int64_t groups, double eps, double lo, double hi) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto h = torch::empty({M, N}, x.options());
    dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
    dense_tiled<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), h.data_ptr<float>(), M, N, K);
    auto y = torch::empty_like(h);
    groupnorm_clamp<<<M * groups, 256>>>(h.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                         y.data_ptr<float>(), N, groups, eps, lo, hi);
    return y;
}
"""
CPP = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps, double lo, double hi);"
ext = load_inline(name="fam_gemm_groupnorm_tiled", cpp_sources=CPP, cuda_sources=CUDA, functions=["forward"])


class ModelNew(torch.nn.Module):
    def __init__(self, d_in, d_out, groups, lo, hi):
        super().__init__()
        self.proj = torch.nn.Linear(d_in, d_out)
        self.norm = torch.nn.GroupNorm(groups, d_out)
        self.lo, self.hi = lo, hi

    def forward(self, x):
        return ext.forward(x.contiguous(), self.proj.weight, self.proj.bias, self.norm.weight, self.norm.bias,
                           self.norm.num_groups, self.norm.eps, self.lo, self.hi)
