"""Linear + GELU + residual as three launches: the matrix product goes to cuBLAS (at::addmm), then
one custom kernel applies GELU and a second adds the residual. The GEMM dominates the time; the two
elementwise kernels could be fused into one epilogue."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

__global__ void residual_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                    float* __restrict__ out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor linear_gelu_residual(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto h = at::addmm(bias, x, weight.t());
    auto g = torch::empty_like(h);
    long n = h.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    gelu_kernel<<<blocks, threads>>>(h.data_ptr<float>(), g.data_ptr<float>(), n);
    auto out = torch::empty_like(g);
    residual_add_kernel<<<blocks, threads>>>(g.data_ptr<float>(), x.data_ptr<float>(),
                                             out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor linear_gelu_residual(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

lgr_ext = load_inline(
    name="ks_example_linear_gelu_residual",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_gelu_residual"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return lgr_ext.linear_gelu_residual(x.contiguous(), self.linear.weight, self.linear.bias)
