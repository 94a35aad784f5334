import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

__global__ void box_blur_kernel(const float* __restrict__ img, float* __restrict__ out, int H, int W, int R) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    float sum = 0.f;
    int cnt = 0;
    for (int dy = -R; dy <= R; ++dy) {
        int yy = y + dy;
        if (yy < 0 || yy >= H) continue;
        for (int dx = -R; dx <= R; ++dx) {
            int xx = x + dx;
            if (xx < 0 || xx >= W) continue;
            sum += __ldg(&img[yy * W + xx]);
            ++cnt;
        }
    }
    out[y * W + x] = sum / cnt;
}

torch::Tensor box_blur(torch::Tensor img, int64_t R) {
    int H = img.size(0), W = img.size(1);
    auto out = torch::empty_like(img);
    box_blur_kernel<<<dim3((W + 15) / 16, (H + 15) / 16), dim3(16, 16)>>>(img.data_ptr<float>(), out.data_ptr<float>(), H, W, R);
    return out;
}
"""
ext = load_inline(name="box_blur", cpp_sources="torch::Tensor box_blur(torch::Tensor img, int64_t R);", cuda_sources=src,
                  functions=["box_blur"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, radius=2):
        super().__init__()
        self.radius = radius

    def forward(self, img):
        return ext.box_blur(img, self.radius)
