# A load_inline candidate that does not compile (the log must reach the repairer).
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
__global__ void k(float* x) { x[threadIdx.x] = undefined_symbol; }
torch::Tensor f(torch::Tensor x) { k<<<1, 32>>>(x.data_ptr<float>()); return x; }
"""
ext = load_inline(name="ks_case_broken", cpp_sources="torch::Tensor f(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["f"], verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return ext.f(a)
