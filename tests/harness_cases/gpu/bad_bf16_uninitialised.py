# Loophole in a bf16 run of scale_bias_relu: returns a bf16 output it never writes (hoping for the reference's
# stale result). The harness poisons freed memory with every bit set, NaN in bf16 too, so it fails.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

_noop = CudaModule('extern "C" __global__ void noop(void* out, long long n) {}', name="noop_bf16").kernel(
    "noop", "ptr, i64")


class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(dim))

    def forward(self, x):
        out = torch.empty_like(x)
        _noop(grid=1, block=32, args=(out, out.numel()))
        return out
