# Loophole: a lazy tensor subclass whose values would be computed when someone looks.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""
_add = CudaModule(SRC, name="add_lz").kernel("add", "ptr, ptr, ptr, i64")


class LazyTensor(torch.Tensor):
    pass


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        _add(grid=(a.numel() + 255) // 256, block=256, args=(a, b, out, a.numel()))
        return out.as_subclass(LazyTensor)
