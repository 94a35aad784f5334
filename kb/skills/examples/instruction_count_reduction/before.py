"""instruction_count_reduction, before: the generic flat-index kernel.

Each element decomposes a 64-bit linear index into (n, c, h, w) with four runtime 64-bit divisions and
modulos (each a ~70-instruction software routine on the GPU) and rebuilds the offset from them, so the
kernel issues several hundred instructions per 8 bytes moved and is instruction-bound.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

__global__ void channel_affine_flat(const float* x, const float* scale, const float* bias, float* y,
                                    long long N, long long C, long long H, long long W) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = N * C * H * W;
    if (idx >= total) return;
    long long w = idx % W;
    long long h = (idx / W) % H;
    long long c = (idx / (W * H)) % C;
    long long n = idx / (W * H * C);
    long long off = ((n * C + c) * H + h) * W + w;
    y[off] = x[off] * scale[c] + bias[c];
}

torch::Tensor forward(torch::Tensor x, torch::Tensor scale, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 4, "x: 4-D float32 CUDA");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long long total = x.numel();
    channel_affine_flat<<<(unsigned)((total + 255) / 256), 256>>>(x.data_ptr<float>(),
        scale.contiguous().data_ptr<float>(), bias.contiguous().data_ptr<float>(), y.data_ptr<float>(),
        x.size(0), x.size(1), x.size(2), x.size(3));
    return y;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor scale, torch::Tensor bias);"

_ext = load_inline(
    name="kb_instruction_count_reduction_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x, self.scale, self.bias)
