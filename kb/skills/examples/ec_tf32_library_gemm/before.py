"""ec_tf32_library_gemm, before: the plain fp32 library path. cuBLAS SGEMM (torch.matmul, a LIBRARY CALL: the
protocol allows cuBLAS for the GEMM part; TF32 stays off, so it runs on the FP32 pipe at about 50 TFLOP/s on an
H200) and one custom kernel that adds the bias and applies the ReLU in place, four columns per thread."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

// y[r][c] = max(y[r][c] + bias[c], 0), in place; float4 path when cols % 4 == 0 and both are 16-byte aligned
__global__ void bias_relu_vec4(float4* __restrict__ y, const float4* __restrict__ bias, long n4, int cols4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = y[i];
        const float4 b = __ldg(bias + (int)(i % cols4));
        v.x = fmaxf(v.x + b.x, 0.f); v.y = fmaxf(v.y + b.y, 0.f);
        v.z = fmaxf(v.z + b.z, 0.f); v.w = fmaxf(v.w + b.w, 0.f);
        y[i] = v;
    }
}

__global__ void bias_relu(float* __restrict__ y, const float* __restrict__ bias, long n, int cols) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = fmaxf(y[i] + bias[i % cols], 0.f);
}

torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && y.dtype() == torch::kFloat32 && y.dim() == 2 && y.is_contiguous(),
                "y: contiguous fp32 CUDA matrix");
    bias = bias.contiguous();
    const long n = y.numel();
    const int cols = (int)y.size(1);
    if (n == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const bool vec = cols % 4 == 0 && (reinterpret_cast<uintptr_t>(y.data_ptr<float>()) & 15) == 0
                     && (reinterpret_cast<uintptr_t>(bias.data_ptr<float>()) & 15) == 0;
    if (vec) {
        const long n4 = n / 4;
        const int blocks = (int)std::min<long>((n4 + 255) / 256, 132L * 16);
        bias_relu_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<float4*>(y.data_ptr<float>()),
                                                   reinterpret_cast<const float4*>(bias.data_ptr<float>()), n4,
                                                   cols / 4);
    } else {
        const int blocks = (int)std::min<long>((n + 255) / 256, 132L * 16);
        bias_relu<<<blocks, 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), n, cols);
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias);"

_ext = load_inline(
    name="kb_ec_tf32_library_gemm_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["bias_relu_"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(x, self.linear.weight.t())   # cuBLAS SGEMM (library call, allowed for the GEMM part)
        return _ext.bias_relu_(y, self.linear.bias)
