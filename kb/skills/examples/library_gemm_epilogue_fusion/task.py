"""Linear + multiply + LeakyReLU (the shape of KernelBench level 2 #12, larger): y = leaky_relu((x @ W^T + b)
* 2.0, 0.1), x 16384 x 512, W 4096 x 512, fp32 in true fp32 (TF32 off). The GEMM is 68.7 GFLOP; the
output is 268 MB, so every separate pass over it costs about as much as 10 % of the GEMM."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, multiplier: float, negative_slope: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x * self.multiplier
        return self.leaky_relu(x)


batch_size, in_features, out_features = 16384, 512, 4096
multiplier, negative_slope = 2.0, 0.1


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]
