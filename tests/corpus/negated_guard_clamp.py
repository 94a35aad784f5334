import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

// nearest-neighbour 2x upsampling; source coordinates clamped with min()
__global__ void upsample_nearest2x(const float* in, float* out, int NC, int H, int W) {
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    int nc = blockIdx.z;
    if (!(ox < 2 * W && oy < 2 * H)) return;
    int ix = min(ox / 2, W - 1);
    int iy = min(oy / 2, H - 1);
    out[((long)nc * 2 * H + oy) * 2 * W + ox] = in[((long)nc * H + iy) * W + ix];
}

torch::Tensor upsample(torch::Tensor x) {
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    auto out = torch::empty({N, C, 2 * H, 2 * W}, x.options());
    upsample_nearest2x<<<dim3((2 * W + 15) / 16, (2 * H + 15) / 16, N * C), dim3(16, 16)>>>(x.data_ptr<float>(), out.data_ptr<float>(), N * C, H, W);
    return out;
}
"""
ext = load_inline(name="upsample2x", cpp_sources="torch::Tensor upsample(torch::Tensor x);", cuda_sources=src,
                  functions=["upsample"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.upsample(x)
