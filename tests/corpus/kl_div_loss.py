import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void kl_div_kernel(const float* __restrict__ log_pred, const float* __restrict__ target,
                              float* __restrict__ out, int n) {
    extern __shared__ float sh[];
    float local = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float t = target[i];
        local += t > 0.f ? t * (logf(t) - log_pred[i]) : 0.f;
    }
    sh[threadIdx.x] = local;
    __syncthreads();
    for (int s = blockDim.x >> 1; s > 32; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x < 32) {
        float v = sh[threadIdx.x] + sh[threadIdx.x + 32];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
        if (threadIdx.x == 0) atomicAdd(out, v);
    }
}

torch::Tensor kl_div(torch::Tensor log_pred, torch::Tensor target) {
    auto out = torch::zeros({1}, log_pred.options());
    int n = log_pred.numel();
    kl_div_kernel<<<512, 256, 256 * sizeof(float)>>>(log_pred.data_ptr<float>(), target.data_ptr<float>(),
                                                     out.data_ptr<float>(), n);
    return out / log_pred.size(0);
}
"""
ext = load_inline(name="kl_div", cpp_sources="torch::Tensor kl_div(torch::Tensor log_pred, torch::Tensor target);",
                  cuda_sources=cuda_src, functions=["kl_div"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        return ext.kl_div(torch.log(predictions), targets)
