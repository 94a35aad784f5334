# Loophole: in_features (64) is baked into the kernel; batch and out_features come from the tensors.
# Correct on the shipped shapes, caught when the second shape set varies in_features.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
#define IN 64
extern "C" __global__ void scale_linear(const float* x, const float* w, float* y, int rows, int outs) {
    int r = blockIdx.y, o = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows || o >= outs) return;
    float acc = 0.f;
    for (int k = 0; k < IN; ++k) acc += x[r * IN + k] * w[o * IN + k];
    y[r * outs + o] = fmaxf(acc, 0.f) * 2.0f;
}
"""
_kernel = CudaModule(SRC, name="scale_linear_hc_in").kernel("scale_linear", "ptr, ptr, ptr, i32, i32")


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, x):
        x = x.contiguous()
        w = self.weight.contiguous()
        rows, outs = x.shape[0], w.shape[0]
        y = torch.empty(rows, outs, device=x.device, dtype=x.dtype)
        _kernel(grid=((outs + 127) // 128, rows), block=128, args=(x, w, y, rows, outs))
        return y
