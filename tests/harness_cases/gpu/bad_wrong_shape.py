import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""
_add = CudaModule(SRC, name="add_ws").kernel("add", "ptr, ptr, ptr, i64")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        out = torch.empty(a.numel(), device=a.device, dtype=a.dtype)  # flat: wrong shape
        _add(grid=(a.numel() + 255) // 256, block=256, args=(a, b, out, a.numel()))
        return out
