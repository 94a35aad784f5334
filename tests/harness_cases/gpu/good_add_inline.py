# Known good: a typical load_inline candidate (torch/extension.h in the CUDA source).
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    auto out = torch::empty_like(a);
    int64_t n = a.numel();
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    add_kernel<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
cpp_src = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"

ext = load_inline(name="ks_case_add", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["add_cuda"],
                  verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return ext.add_cuda(a.contiguous(), b.contiguous())
