# cuBLAS for the whole GEMM: a cheat under library_policy=forbid, allowed under allow_gemm_conv.
import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
