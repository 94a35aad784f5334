"""constant_memory_broadcast, after: the coefficients in __constant__ memory.

Each call copies the 256-byte coefficient tensor device-to-device into a __constant__ array on the
current stream (no host synchronisation). Constant-bank operands feed the FFMA directly (c[bank][offset]
in SASS): the 64 load instructions disappear and the warp-uniform reads are served by the constant cache.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

#define NCOEF 64

__constant__ float c_coeffs[NCOEF];

__global__ void horner_constant(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xv = x[i];
    float acc = c_coeffs[NCOEF - 1];
#pragma unroll
    for (int k = NCOEF - 2; k >= 0; --k) acc = acc * xv + c_coeffs[k];
    y[i] = acc;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor coeffs) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && coeffs.numel() == NCOEF, "float32 CUDA, 64 coefficients");
    TORCH_CHECK(coeffs.is_cuda() && coeffs.dtype() == torch::kFloat32, "coefficients: float32 CUDA");
    x = x.contiguous();
    coeffs = coeffs.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    // stream-ordered device-to-device copy: later launches on this stream see the new values
    cudaMemcpyToSymbolAsync(c_coeffs, coeffs.data_ptr<float>(), NCOEF * sizeof(float), 0, cudaMemcpyDeviceToDevice, 0);
    if (n) horner_constant<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor coeffs);"

_ext = load_inline(
    name="kb_constant_memory_broadcast_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

DEGREE = 63


class ModelNew(nn.Module):
    def __init__(self, degree: int = DEGREE):
        super().__init__()
        k = torch.arange(degree + 1, dtype=torch.float32)
        self.register_buffer("coeffs", (-1.0) ** k / (k + 1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.coeffs)
