# Known good under the kernelbench protocol: cuDNN does the convolution (library allowed), a fast-path
# kernel the ReLU.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
extern "C" __global__ void relu(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
"""
_relu = CudaModule(SRC, name="relu_after_conv").kernel("relu", "ptr, ptr, i64")


class ModelNew(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x):
        x = self.conv(x).contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu(grid=(n + 255) // 256, block=256, args=(x, y, n))
        return y
