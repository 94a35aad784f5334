"""A ReLU that already streams at the DRAM roof: 16-byte float4 loads and stores in a grid-stride
loop. Nothing is reused, so only moving fewer bytes (fusion, narrower storage) can still help."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__global__ void relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.0f);
        v.y = fmaxf(v.y, 0.0f);
        v.z = fmaxf(v.z, 0.0f);
        v.w = fmaxf(v.w, 0.0f);
        y[i] = v;
    }
}

torch::Tensor relu_vec4(torch::Tensor x) {
    TORCH_CHECK(x.numel() % 4 == 0, "numel must be a multiple of 4");
    auto y = torch::empty_like(x);
    long n4 = x.numel() / 4;
    int threads = 256;
    int blocks = 132 * 8;
    relu_vec4_kernel<<<blocks, threads>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
                                          reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    return y;
}
"""

cpp_source = "torch::Tensor relu_vec4(torch::Tensor x);"

relu_ext = load_inline(
    name="ks_example_relu_vec4",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_vec4"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_vec4(x.contiguous())
