# Does not compile.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
    long long i = blockIdx.x * blockDim.x + threadIdx.x
    if (i < n) out[i] = a[i] + undefined_name[i];
}
"""
_add = CudaModule(SRC, name="broken").kernel("add")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return a
