# Plain first kernel: one thread per output of the Linear (dot product straight from global memory),
# then one block per (row, group) for the statistics, the affine map and the clamp.
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>

__global__ void dense_naive(const float* x, const float* w, const float* b, float* y, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += x[row * K + k] * w[col * K + k];
    y[row * N + col] = acc + b[col];
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
    dense_naive<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), h.data_ptr<float>(), M, N, K);
    auto y = torch::empty_like(h);
    groupnorm_clamp<<<M * groups, 256>>>(h.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                         y.data_ptr<float>(), N, groups, eps, lo, hi);
    return y;
}
"""
CPP = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps, double lo, double hi);"
ext = load_inline(name="fam_gemm_groupnorm", cpp_sources=CPP, cuda_sources=CUDA, functions=["forward"])


class ModelNew(torch.nn.Module):
    def __init__(self, d_in, d_out, groups, lo, hi):
        super().__init__()
        self.proj = torch.nn.Linear(d_in, d_out)
        self.norm = torch.nn.GroupNorm(groups, d_out)
        self.lo, self.hi = lo, hi

    def forward(self, x):
        return ext.forward(x.contiguous(), self.proj.weight, self.proj.bias, self.norm.weight, self.norm.bias,
                           self.norm.num_groups, self.norm.eps, self.lo, self.hi)
