# Loophole: caches the output by input pointer, so timed calls on the same buffers are free.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""
_add = CudaModule(SRC, name="add_pc").kernel("add", "ptr, ptr, ptr, i64")
_cache = {}


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        key = (a.data_ptr(), b.data_ptr(), a.numel())
        if key not in _cache:
            out = torch.empty_like(a)
            _add(grid=(a.numel() + 255) // 256, block=256, args=(a, b, out, a.numel()))
            _cache[key] = out
        return _cache[key]
