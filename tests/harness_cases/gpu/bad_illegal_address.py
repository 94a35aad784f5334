# Writes far outside its buffer: CUDA error 700 (sticky); only this worker may die.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void bad(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i + (1LL << 40)] = a[i] + b[i];
}
"""
_bad = CudaModule(SRC, name="bad").kernel("bad", "ptr, ptr, ptr, i64")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        n = a.numel()
        _bad(grid=(n + 255) // 256, block=256, args=(a, b, out, n))
        return out
