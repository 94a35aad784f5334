import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

HEADER = "#include <torch/extension.h>\n"
KERNEL = r"""
__global__ void hardtanh_kernel(const float* __restrict__ x, float* __restrict__ y, float lo, float hi, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    const long step = (long)blockDim.x * gridDim.x;
    while (i < n) {
        float v = x[i];
        y[i] = v < lo ? lo : (v > hi ? hi : v);
        i += step;
    }
}

torch::Tensor hardtanh(torch::Tensor x, double lo, double hi) {
    auto y = torch::empty_like(x);
    hardtanh_kernel<<<1056, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)lo, (float)hi, x.numel());
    return y;
}
"""
ext = load_inline(name="hardtanh_w", cpp_sources="torch::Tensor hardtanh(torch::Tensor x, double lo, double hi);",
                  cuda_sources=HEADER + KERNEL, functions=["hardtanh"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, min_val=-1.0, max_val=1.0):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def _launch(self, x):
        return ext.hardtanh(x.contiguous(), self.min_val, self.max_val)

    def forward(self, x):
        return self._launch(x)
