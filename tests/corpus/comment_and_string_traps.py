import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Earlier attempt used __shared__ float tile[32][32]; and expf(x) with float4 loads: removed.
cuda_source = r"""
#include <torch/extension.h>
#include <cstdio>

/*
 * Old version (kept for reference, not compiled):
 *   __shared__ float tile[32][33];
 *   float4 v = reinterpret_cast<const float4*>(x)[i];
 *   for (int k = 0; k < K; ++k) acc += a[k] * b[k];
 *   atomicAdd(&hist[bin], 1);
 */
__global__ void clamp_kernel(const float* __restrict__ x, float* __restrict__ y, float lo, float hi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0 && n < 0) printf("expf( __syncthreads() tanhf( float4 %d\n", n);  // never true
    // y[i] = expf(x[i]);  <- not this
    y[i] = fminf(fmaxf(x[i], lo), hi);
}

torch::Tensor clamp_fwd(torch::Tensor x, double lo, double hi) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    TORCH_CHECK(n % 256 == 0, "n must be a multiple of 256 (no bounds check in the kernel)");
    const char* note = "kernel<<<1, 1>>>() cudaDeviceSynchronize()";
    (void)note;
    clamp_kernel<<<n / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)lo, (float)hi, n);
    return y;
}
"""

doc = """__global__ void fake_kernel(float* x) { __shared__ float s[64]; x[0] = expf(s[0]); }"""

ext = load_inline(name="clamp_traps", cpp_sources="torch::Tensor clamp_fwd(torch::Tensor x, double lo, double hi);",
                  cuda_sources=cuda_source, functions=["clamp_fwd"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, lo: float = -1.0, hi: float = 1.0):
        super().__init__()
        self.lo, self.hi = lo, hi

    def forward(self, x):
        # torch.cuda.synchronize() would break graphs; we do not call it
        return ext.clamp_fwd(x, self.lo, self.hi)
