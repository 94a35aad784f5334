import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void avg_pool2d_kernel(const float* input, float* output, int channels, int in_h, int in_w,
                                  int out_h, int out_w, int kernel_size, int stride, int padding) {
    int ow = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = blockIdx.y * blockDim.y + threadIdx.y;
    int nc = blockIdx.z;
    if (ow >= out_w || oh >= out_h) return;
    float sum = 0.0f;
    int h0 = oh * stride - padding, w0 = ow * stride - padding;
    for (int i = 0; i < kernel_size; i++) {
        for (int j = 0; j < kernel_size; j++) {
            int h = h0 + i, w = w0 + j;
            if (h >= 0 && h < in_h && w >= 0 && w < in_w) sum += input[(nc * in_h + h) * in_w + w];
        }
    }
    output[(nc * out_h + oh) * out_w + ow] = sum / (kernel_size * kernel_size);
}

torch::Tensor avg_pool2d(torch::Tensor x, int kernel_size, int stride, int padding) {
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    int out_h = (H + 2 * padding - kernel_size) / stride + 1;
    int out_w = (W + 2 * padding - kernel_size) / stride + 1;
    auto out = torch::empty({N, C, out_h, out_w}, x.options());
    dim3 block(16, 16), grid((out_w + 15) / 16, (out_h + 15) / 16, N * C);
    avg_pool2d_kernel<<<grid, block>>>(x.data_ptr<float>(), out.data_ptr<float>(), C, H, W, out_h, out_w,
                                       kernel_size, stride, padding);
    return out;
}
"""
ext = load_inline(name="avgpool", cpp_sources="torch::Tensor avg_pool2d(torch::Tensor x, int kernel_size, int stride, int padding);",
                  cuda_sources=src, functions=["avg_pool2d"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.k, self.s, self.p = kernel_size, stride or kernel_size, padding

    def forward(self, x):
        return ext.avg_pool2d(x, self.k, self.s, self.p)
