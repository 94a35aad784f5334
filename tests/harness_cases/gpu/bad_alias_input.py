# Loophole: writes the result into an input and returns that input.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add_into(float* a, const float* b, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}
"""
_add = CudaModule(SRC, name="add_al").kernel("add_into", "ptr, ptr, i64")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        _add(grid=(a.numel() + 255) // 256, block=256, args=(a, b, a.numel()))
        return a
