"""Blind-set kernel bl23_iterated_update_small: a first CUDA version of the task (60 steps of x = 0.9 x + 0.1 tanh(x) on a small state vector, one kernel launch per step)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void relax_step_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.9f * x[i] + 0.1f * tanhf(x[i]);
}

torch::Tensor relax_step(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relax_step_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = """
torch::Tensor relax_step(torch::Tensor x);
"""

_ext = load_inline(
    name="blind_bl23_iterated_update_small",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['relax_step'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def forward(self, x):
        x = x.contiguous()
        for _ in range(self.steps):
            x = _ext.relax_step(x)
        return x
