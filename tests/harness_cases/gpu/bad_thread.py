# Loophole: a background thread does the work after forward returns.
import threading

import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""
_add = CudaModule(SRC, name="add_th").kernel("add", "ptr, ptr, ptr, i64")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)

        def work():
            _add(grid=(a.numel() + 255) // 256, block=256, args=(a, b, out, a.numel()))

        t = threading.Thread(target=work, name="late-worker")
        t.start()
        t.join()
        threading.Thread(target=threading.Event().wait, daemon=True, name="lingering").start()
        return out
