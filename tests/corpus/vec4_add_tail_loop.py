import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <cstdint>

__global__ void add_vec4_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, long n) {
    long tid = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)blockDim.x * gridDim.x;
    long n4 = n / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    for (long i = tid; i < n4; i += stride) {
        float4 x = a4[i];
        float4 y = b4[i];
        c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    // scalar tail, a separate loop
    for (long i = n4 * 4 + tid; i < n; i += stride) {
        c[i] = a[i] + b[i];
    }
}

torch::Tensor add_vec4(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(reinterpret_cast<uintptr_t>(a.data_ptr<float>()) % 16 == 0, "a must be 16-byte aligned");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(b.data_ptr<float>()) % 16 == 0, "b must be 16-byte aligned");
    auto c = torch::empty_like(a);
    long n = a.numel();
    add_vec4_kernel<<<132 * 4, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    return c;
}
"""

ext = load_inline(name="add_vec4", cpp_sources="torch::Tensor add_vec4(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=source, functions=["add_vec4"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.add_vec4(a.contiguous(), b.contiguous())
