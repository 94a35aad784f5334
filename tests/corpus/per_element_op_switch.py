import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

// Each element carries an opcode: 0 identity, 1 relu, 2 square, 3 negate.
__global__ void apply_op_kernel(const float* __restrict__ x, const int* __restrict__ op,
                                float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        switch (op[i]) {
            case 1: v = fmaxf(v, 0.0f); break;
            case 2: v = v * v; break;
            case 3: v = -v; break;
            default: break;
        }
        y[i] = v;
    }
}

torch::Tensor apply_op(torch::Tensor x, torch::Tensor op) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    apply_op_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), op.data_ptr<int>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="apply_op", cpp_sources="torch::Tensor apply_op(torch::Tensor x, torch::Tensor op);",
                  cuda_sources=cuda_source, functions=["apply_op"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x, op):
        return ext.apply_op(x, op)
