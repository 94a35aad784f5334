import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_fp16.h>

__global__ void silu_half2_kernel(const __half2* __restrict__ x, __half2* __restrict__ y, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n2) {
        float2 v = __half22float2(x[i]);
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        y[i] = __float22half2_rn(v);
    }
}

torch::Tensor silu_half(torch::Tensor x) {
    TORCH_CHECK(x.numel() % 2 == 0, "even number of elements required");
    auto y = torch::empty_like(x);
    int n2 = x.numel() / 2;
    silu_half2_kernel<<<(n2 + 255) / 256, 256>>>(
        reinterpret_cast<const __half2*>(x.data_ptr<at::Half>()),
        reinterpret_cast<__half2*>(y.data_ptr<at::Half>()), n2);
    return y;
}
"""

ext = load_inline(name="silu_half2", cpp_sources="torch::Tensor silu_half(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["silu_half"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.silu_half(x.contiguous())
