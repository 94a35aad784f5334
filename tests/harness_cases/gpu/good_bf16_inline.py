# Known good in a bf16 run of scale_bias_relu: a load_inline kernel on __nv_bfloat16 data, two elements per thread
# through __nv_bfloat162 loads and stores, math in fp32 and one rounding per element (the reference's bf16 ops round
# the same way, so the outputs match exactly). It refuses anything but bf16 inputs (a fp32 run fails at its check).
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>

__global__ void scale_bias_relu_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                     __nv_bfloat16* __restrict__ out, int64_t n, int64_t dim) {
    int64_t i = 2 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 1 < n) {
        __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(x + i);
        float a = fmaxf(fmaf(__low2float(v), 2.0f, __bfloat162float(bias[i % dim])), 0.0f);
        float b = fmaxf(fmaf(__high2float(v), 2.0f, __bfloat162float(bias[(i + 1) % dim])), 0.0f);
        *reinterpret_cast<__nv_bfloat162*>(out + i) = __floats2bfloat162_rn(a, b);
    } else if (i < n) {
        out[i] = __float2bfloat16_rn(fmaxf(fmaf(__bfloat162float(x[i]), 2.0f, __bfloat162float(bias[i % dim])), 0.0f));
    }
}

torch::Tensor scale_bias_relu(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && bias.scalar_type() == torch::kBFloat16,
                "bf16 tensors expected, got ", x.scalar_type(), " and ", bias.scalar_type());
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    int64_t dim = bc.numel();
    if (n == 0) return out;
    const int threads = 256;
    int64_t blocks = ((n + 1) / 2 + threads - 1) / threads;
    scale_bias_relu_bf16<<<blocks, threads>>>(
        reinterpret_cast<const __nv_bfloat16*>(xc.data_ptr<at::BFloat16>()),
        reinterpret_cast<const __nv_bfloat16*>(bc.data_ptr<at::BFloat16>()),
        reinterpret_cast<__nv_bfloat16*>(out.data_ptr<at::BFloat16>()), n, dim);
    return out;
}
"""
cpp_src = "torch::Tensor scale_bias_relu(torch::Tensor x, torch::Tensor bias);"

ext = load_inline(name="ks_case_bf16_scale_bias_relu", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["scale_bias_relu"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return ext.scale_bias_relu(x, self.bias)
