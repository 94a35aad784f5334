# Results depend on timing (a stand-in for a race): within tolerance, but re-runs differ.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a[i] + b[i];
        long long t = clock64();
        if ((t >> 3) & 1) v += 4e-5f * fabsf(v);
        out[i] = v;
    }
}
"""
_add = CudaModule(SRC, name="add_nd").kernel("add", "ptr, ptr, ptr, i64")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        _add(grid=(a.numel() + 255) // 256, block=256, args=(a, b, out, a.numel()))
        return out
