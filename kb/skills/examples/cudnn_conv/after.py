"""cudnn_conv, after: the convolution through cuDNN, the bias and ReLU in one custom epilogue kernel.

cuDNN picks a tuned implicit-GEMM/Winograd/FFT algorithm (benchmark=True autotunes it on the first call
per shape); TF32 stays off so the fp32 answer is kept. The epilogue adds the bias and clamps in place,
so the library's output is read and written once more (51 MB) instead of running two eager ops."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>

// y[n, k, :, :] = max(y + bias[k], 0) in place; one block row per (n, k) plane, float4 (H*W % 4 == 0).
__global__ void bias_relu_inplace(float4* __restrict__ y, const float* __restrict__ bias, int K, int hw4) {
    int plane = blockIdx.y;
    float b = bias[plane % K];
    float4* yp = y + (size_t)plane * hw4;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hw4; i += gridDim.x * blockDim.x) {
        float4 v = yp[i];
        v.x = fmaxf(v.x + b, 0.f); v.y = fmaxf(v.y + b, 0.f); v.z = fmaxf(v.z + b, 0.f); v.w = fmaxf(v.w + b, 0.f);
        yp[i] = v;
    }
}

torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && y.dtype() == torch::kFloat32 && y.dim() == 4 && y.is_contiguous(), "y: contiguous NCHW float32");
    int K = y.size(1), hw = y.size(2) * y.size(3);
    TORCH_CHECK(hw % 4 == 0, "H * W must be a multiple of 4");
    dim3 grid((hw / 4 + 255) / 256, y.size(0) * K);
    bias_relu_inplace<<<grid, 256>>>(reinterpret_cast<float4*>(y.data_ptr<float>()), bias.contiguous().data_ptr<float>(), K, hw / 4);
    return y;
}
"""

CPP_SRC = "torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias);"

_ext = load_inline(
    name="kb_cudnn_conv_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["bias_relu_"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=False):
            y = F.conv2d(x, self.conv.weight, None, padding=1)
        return _ext.bias_relu_(y.contiguous(), self.conv.bias)
