# A kernel that never ends: the parent kills the worker at the run limit.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void spin(volatile int* flag) { while (flag[0] == 0) { } }
"""
_spin = CudaModule(SRC, name="spin").kernel("spin", "ptr")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        flag = torch.zeros(1, dtype=torch.int32, device=a.device)
        _spin(grid=1, block=1, args=(flag,))
        return a + b
