# Known good: the fast path (nvcc -cubin + driver launch), see pipeline/harness/FASTPATH.md.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add(const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) out[i] = a[i] + b[i];
}
"""
_add = CudaModule(SRC, name="add").kernel("add", "ptr, ptr, ptr, i64")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        _add(grid=min((n + 255) // 256, 132 * 16), block=256, args=(a, b, out, n))
        return out
