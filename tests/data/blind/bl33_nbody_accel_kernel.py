"""Blind-set kernel bl33_nbody_accel: a first CUDA version of the task (softened gravitational acceleration on every body from all bodies (all pairs, fp32))."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

__global__ void nbody_kernel(const float* pos, const float* mass, float* acc, int n, float eps2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    float ax = 0.f, ay = 0.f, az = 0.f;
    for (int j = 0; j < n; ++j) {
        float dx = pos[3 * j] - xi, dy = pos[3 * j + 1] - yi, dz = pos[3 * j + 2] - zi;
        float r2 = dx * dx + dy * dy + dz * dz + eps2;
        float r = sqrtf(r2);
        float s = mass[j] / (r2 * r);
        ax += dx * s; ay += dy * s; az += dz * s;
    }
    acc[3 * i] = ax; acc[3 * i + 1] = ay; acc[3 * i + 2] = az;
}

torch::Tensor nbody(torch::Tensor pos, torch::Tensor mass, double eps2) {
    int n = pos.size(0);
    auto acc = torch::empty_like(pos);
    nbody_kernel<<<(n + 127) / 128, 128>>>(pos.data_ptr<float>(), mass.data_ptr<float>(), acc.data_ptr<float>(), n, (float)eps2);
    return acc;
}
"""

CPP_SRC = """
torch::Tensor nbody(torch::Tensor pos, torch::Tensor mass, double eps2);
"""

_ext = load_inline(
    name="blind_bl33_nbody_accel",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['nbody'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, eps2: float):
        super().__init__()
        self.eps2 = eps2

    def forward(self, pos, mass):
        return _ext.nbody(pos.contiguous(), mass.contiguous(), self.eps2)
