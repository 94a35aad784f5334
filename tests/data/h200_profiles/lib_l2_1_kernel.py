import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void relu_bias_vec4_kernel(float* __restrict__ y,
                                      const float* __restrict__ bias,
                                      long long nvec, long long hw4, int C) {
    float4* y4 = reinterpret_cast<float4*>(y);
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride) {
        int c = (int)((i / hw4) % C);
        float b = __ldg(bias + c);
        float4 v = y4[i];
        v.x = fmaxf(v.x, 0.0f) + b;
        v.y = fmaxf(v.y, 0.0f) + b;
        v.z = fmaxf(v.z, 0.0f) + b;
        v.w = fmaxf(v.w, 0.0f) + b;
        y4[i] = v;
    }
}

__global__ void relu_bias_scalar_kernel(float* __restrict__ y,
                                        const float* __restrict__ bias,
                                        long long n, long long hw, int C) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int c = (int)((i / hw) % C);
        y[i] = fmaxf(y[i], 0.0f) + __ldg(bias + c);
    }
}

torch::Tensor relu_bias_inplace(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && bias.is_cuda(), "tensors must be CUDA");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32, "fp32 only");
    TORCH_CHECK(y.dim() == 4, "expected NCHW tensor");
    TORCH_CHECK(y.is_contiguous(), "y must be contiguous");
    TORCH_CHECK(bias.is_contiguous(), "bias must be contiguous");
    const at::cuda::CUDAGuard guard(y.device());
    const int C = (int)y.size(1);
    TORCH_CHECK(bias.numel() == C, "bias must have C elements");
    const long long hw = (long long)y.size(2) * y.size(3);
    const long long n = y.numel();
    if (n == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int threads = 256;
    float* yp = y.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    if ((hw % 4 == 0) && ((reinterpret_cast<uintptr_t>(yp) & 15) == 0)) {
        long long nvec = n / 4;
        long long blocks = (nvec + threads - 1) / threads;
        long long maxb = (long long)sms * 32;
        if (blocks > maxb) blocks = maxb;
        relu_bias_vec4_kernel<<<(unsigned)blocks, threads, 0, stream>>>(yp, bp, nvec, hw / 4, C);
    } else {
        long long blocks = (n + threads - 1) / threads;
        long long maxb = (long long)sms * 32;
        if (blocks > maxb) blocks = maxb;
        relu_bias_scalar_kernel<<<(unsigned)blocks, threads, 0, stream>>>(yp, bp, n, hw, C);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
#include <torch/extension.h>
torch::Tensor relu_bias_inplace(torch::Tensor y, torch::Tensor bias);
"""

_ext = load_inline(
    name="kb006_conv_relu_biasadd_v1",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["relu_bias_inplace"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous()
        # strict fp32 convolution (no TF32), restored afterwards
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False
        try:
            y = F.conv2d(x, self.conv.weight, self.conv.bias,
                         self.conv.stride, self.conv.padding,
                         self.conv.dilation, self.conv.groups)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
        y = y.contiguous()
        b = self.bias.contiguous().view(-1)
        return _ext.relu_bias_inplace(y, b)
