# Loophole: shapes baked in (2048 x 2048): caught by the second shape set.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 2048LL * 2048LL) out[i] = a[i] + b[i];
}
"""
_add = CudaModule(SRC, name="add_hc").kernel("add", "ptr, ptr, ptr")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        out = torch.empty(2048, 2048, device=a.device, dtype=a.dtype)
        _add(grid=(2048 * 2048) // 256, block=256, args=(a, b, out))
        return out
