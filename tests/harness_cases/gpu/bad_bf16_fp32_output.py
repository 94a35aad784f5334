# Wrong in a bf16 run of scale_bias_relu: reads the bf16 input and bias correctly but writes a float32 output; the
# reference's is bfloat16, so the harness fails it with a message naming both dtypes.
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>

__global__ void scale_bias_relu_f32out(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                       float* __restrict__ out, int64_t n, int64_t dim) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(fmaf(__bfloat162float(x[i]), 2.0f, __bfloat162float(bias[i % dim])), 0.0f);
}

torch::Tensor scale_bias_relu_f32(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && bias.scalar_type() == torch::kBFloat16, "bf16 expected");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto out = torch::empty(xc.sizes(), xc.options().dtype(torch::kFloat32));
    int64_t n = xc.numel();
    if (n == 0) return out;
    const int threads = 256;
    scale_bias_relu_f32out<<<(n + threads - 1) / threads, threads>>>(
        reinterpret_cast<const __nv_bfloat16*>(xc.data_ptr<at::BFloat16>()),
        reinterpret_cast<const __nv_bfloat16*>(bc.data_ptr<at::BFloat16>()), out.data_ptr<float>(), n, bc.numel());
    return out;
}
"""
cpp_src = "torch::Tensor scale_bias_relu_f32(torch::Tensor x, torch::Tensor bias);"

ext = load_inline(name="ks_case_bf16_fp32_output", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["scale_bias_relu_f32"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return ext.scale_bias_relu_f32(x, self.bias)
