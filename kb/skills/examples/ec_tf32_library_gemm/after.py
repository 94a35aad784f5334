"""ec_tf32_library_gemm, after: the GEMM still runs in cuBLAS (a LIBRARY CALL: the protocol allows cuBLAS for
the GEMM part), but on the TF32 tensor cores at fp32 accuracy. Each operand is split once into TF32-exact parts,
v = hi + lo with hi = tf32(v) and lo = tf32(v - hi), and laid out along K so that ONE cublasGemmEx with
CUBLAS_COMPUTE_32F_FAST_TF32 over K' = 3K sums x_lo W_hi + x_hi W_lo + x_hi W_hi (the small products first) in
fp32: x becomes [x_lo | x_hi | x_hi] (M x 3K), W becomes [W_hi | W_lo | W_hi] (N x 3K). The weight is split on every
call here (about 0.15 ms of streaming next to a 2-3 ms GEMM); caching its split per weight version saves that, see the
method's pitfalls for how and for the reviewer's output-caching patterns. The bias + ReLU kernel is the before's.
Global TF32 switches stay off: only this call uses TF32."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

// Round an fp32 value to the nearest TF32 value (10 explicit mantissa bits) by integer arithmetic on its bits.
__device__ __forceinline__ float tf32_round(float v) {
    const float r = __uint_as_float((__float_as_uint(v) + 0x1000u) & 0xffffe000u);
    return isinf(r) && !isinf(v) ? __uint_as_float(__float_as_uint(v) & 0xffffe000u) : r;  // no overflow to inf
}

// v = hi + lo, both exact TF32 values; v - hi is exact in fp32, lo keeps its top 11 bits.
__device__ __forceinline__ void split(float v, float& hi, float& lo) {
    hi = tf32_round(v);
    lo = isfinite(v) ? tf32_round(v - hi) : 0.f;
}

// src (rows x K, row-major) -> dst (rows x 3K). weight == 0: [lo | hi | hi] (the activation);
// weight == 1: [hi | lo | hi] (the weight). Block j of x meets block j of W: lo*hi, hi*lo, hi*hi.
__global__ void split_stack_vec4(const float4* __restrict__ src, float* __restrict__ dst, long n4, long k4,
                                 long k, int weight) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        const long r = i / k4, c = (i - r * k4) * 4;
        const float4 v = __ldg(src + i);
        float4 h, l;
        split(v.x, h.x, l.x); split(v.y, h.y, l.y); split(v.z, h.z, l.z); split(v.w, h.w, l.w);
        float* row = dst + r * 3 * k;
        *reinterpret_cast<float4*>(row + c) = weight ? h : l;
        *reinterpret_cast<float4*>(row + k + c) = weight ? l : h;
        *reinterpret_cast<float4*>(row + 2 * k + c) = h;
    }
}

__global__ void split_stack(const float* __restrict__ src, float* __restrict__ dst, long n, long k, int weight) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const long r = i / k, c = i - r * k;
        float h, l;
        split(src[i], h, l);
        float* row = dst + r * 3 * k;
        row[c] = weight ? h : l;
        row[k + c] = weight ? l : h;
        row[2 * k + c] = h;
    }
}

torch::Tensor split_stack_k(torch::Tensor src, int64_t weight) {
    TORCH_CHECK(src.is_cuda() && src.dtype() == torch::kFloat32 && src.dim() == 2, "src: fp32 CUDA matrix");
    src = src.contiguous();
    const long rows = src.size(0), k = src.size(1), n = rows * k;
    auto dst = torch::empty({rows, 3 * k}, src.options());
    if (n == 0) return dst;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* s = src.data_ptr<float>();
    float* d = dst.data_ptr<float>();
    const bool vec = k % 4 == 0 && (reinterpret_cast<uintptr_t>(s) & 15) == 0 && (reinterpret_cast<uintptr_t>(d) & 15) == 0;
    if (vec) {
        const long n4 = n / 4;
        const int blocks = (int)std::min<long>((n4 + 255) / 256, 132L * 16);
        split_stack_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(s), d, n4, k / 4, k, (int)weight);
    } else {
        const int blocks = (int)std::min<long>((n + 255) / 256, 132L * 16);
        split_stack<<<blocks, 256, 0, stream>>>(s, d, n, k, (int)weight);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return dst;
}

// y (M x N, row-major) = xs (M x 3K) . ws (N x 3K)^T on the TF32 tensor cores, fp32 accumulation and output.
// Column-major view for cuBLAS: y^T (N x M, ld N) = ws^T (op T of a 3K x N column-major matrix) . xs^T.
torch::Tensor gemm_tf32_nt(torch::Tensor xs, torch::Tensor ws) {
    TORCH_CHECK(xs.is_cuda() && ws.is_cuda() && xs.dtype() == torch::kFloat32 && ws.dtype() == torch::kFloat32,
                "fp32 CUDA operands");
    TORCH_CHECK(xs.dim() == 2 && ws.dim() == 2 && xs.size(1) == ws.size(1) && xs.is_contiguous() && ws.is_contiguous(),
                "contiguous M x 3K and N x 3K operands");
    const long m = xs.size(0), n = ws.size(0), k3 = xs.size(1);
    TORCH_CHECK(m <= INT32_MAX && n <= INT32_MAX && k3 <= INT32_MAX, "dimension too large for cublasGemmEx");
    auto y = torch::empty({m, n}, xs.options());
    if (m == 0 || n == 0) return y;
    if (k3 == 0) return y.zero_();
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();  // bound to the current stream, with workspace
    const float one = 1.f, zero = 0.f;
    const cublasStatus_t st = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k3, &one,
                                           ws.data_ptr<float>(), CUDA_R_32F, (int)k3,
                                           xs.data_ptr<float>(), CUDA_R_32F, (int)k3, &zero,
                                           y.data_ptr<float>(), CUDA_R_32F, (int)n,
                                           CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx (TF32, stacked K) failed with status ", (int)st);
    return y;
}

// y[r][c] = max(y[r][c] + bias[c], 0), in place (the before's epilogue)
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

CPP_SRC = """
torch::Tensor split_stack_k(torch::Tensor src, int64_t weight);
torch::Tensor gemm_tf32_nt(torch::Tensor xs, torch::Tensor ws);
torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias);
"""

_ext = load_inline(
    name="kb_ec_tf32_library_gemm_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["split_stack_k", "gemm_tf32_nt", "bias_relu_"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs = _ext.split_stack_k(x.reshape(-1, x.shape[-1]), 0)            # [x_lo | x_hi | x_hi]
        ws = _ext.split_stack_k(self.linear.weight, 1)                     # [W_hi | W_lo | W_hi]
        y = _ext.gemm_tf32_nt(xs, ws)                                      # one cuBLAS TF32 GEMM, K' = 3K
        y = _ext.bias_relu_(y, self.linear.bias)
        return y.reshape(*x.shape[:-1], y.shape[-1])
