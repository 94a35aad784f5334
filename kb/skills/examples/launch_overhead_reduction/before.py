"""launch_overhead_reduction, before: one extension call per tensor.

Each call pays the Python/pybind dispatch, an allocation and a kernel launch (several microseconds of
host time) for 1-2 microseconds of GPU work, so the GPU idles most of the forward.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v / (1.f + expf(-v)); }
}

torch::Tensor silu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32, "x: float32 CUDA");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n) silu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor silu(torch::Tensor x);"

_ext = load_inline(
    name="kb_launch_overhead_reduction_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["silu"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, *xs: torch.Tensor):
        return tuple(_ext.silu(x) for x in xs)
