import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void rgba_to_gray_kernel(const uchar4* __restrict__ rgba, unsigned char* __restrict__ gray, int num_pixels) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < num_pixels) {
        uchar4 p = rgba[i];
        gray[i] = (unsigned char)(0.299f * p.x + 0.587f * p.y + 0.114f * p.z);
    }
}

torch::Tensor rgba_to_gray(torch::Tensor rgba) {
    int num_pixels = rgba.numel() / 4;
    auto gray = torch::empty({num_pixels}, rgba.options());
    rgba_to_gray_kernel<<<(num_pixels + 255) / 256, 256>>>(reinterpret_cast<const uchar4*>(rgba.data_ptr<uint8_t>()),
                                                           gray.data_ptr<uint8_t>(), num_pixels);
    return gray;
}
"""
ext = load_inline(name="rgba_gray", cpp_sources="torch::Tensor rgba_to_gray(torch::Tensor rgba);", cuda_sources=src,
                  functions=["rgba_to_gray"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.rgba_to_gray(x)
