"""Blind-set kernel bl29_particles_aos: a first CUDA version of the task (explicit Euler step for particles stored as an array of 8-float records (x y z vx vy vz m pad))."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

struct Particle { float x, y, z, vx, vy, vz, m, pad; };

__global__ void euler_aos_kernel(const Particle* in, Particle* out, float dt, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Particle p = in[i];
    float damp = 1.0f - 0.01f * dt / p.m;
    Particle q;
    q.x = p.x + dt * p.vx;
    q.y = p.y + dt * p.vy;
    q.z = p.z + dt * p.vz;
    q.vx = p.vx * damp;
    q.vy = p.vy * damp;
    q.vz = p.vz * damp;
    q.m = p.m;
    q.pad = p.pad;
    out[i] = q;
}

torch::Tensor euler_aos(torch::Tensor p, double dt) {
    auto out = torch::empty_like(p);
    int n = p.size(0);
    euler_aos_kernel<<<(n + 255) / 256, 256>>>((const Particle*)p.data_ptr<float>(), (Particle*)out.data_ptr<float>(), (float)dt, n);
    return out;
}
"""

CPP_SRC = """
torch::Tensor euler_aos(torch::Tensor p, double dt);
"""

_ext = load_inline(
    name="blind_bl29_particles_aos",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=['euler_aos'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dt: float):
        super().__init__()
        self.dt = dt

    def forward(self, p):
        return _ext.euler_aos(p.contiguous(), self.dt)
