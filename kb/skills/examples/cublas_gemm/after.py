"""cublas_gemm, after: the GEMM goes to cuBLAS through torch.matmul (LIBRARY CALL, on purpose: calling
the vendor GEMM is this method; the harness must allow library calls, and here the task's op is GEMM
+ epilogue, not the bare matmul), kept in true fp32 (TF32 is left off, as torch's default for
matmul), and the relu * 0.5 tail runs in a custom in-place kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void relu_scale_inplace(float* __restrict__ y, long n, float scale) {
    long stride = (long)gridDim.x * blockDim.x;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride) y[i] = fmaxf(y[i], 0.0f) * scale;
}

torch::Tensor relu_scale_(torch::Tensor y, double scale) {
    long n = y.numel();
    if (n == 0) return y;
    long blocks = (n + 255) / 256;
    if (blocks > 1048576) blocks = 1048576;
    relu_scale_inplace<<<(unsigned)blocks, 256>>>(y.data_ptr<float>(), n, (float)scale);
    return y;
}
"""

CPP_SRC = "torch::Tensor relu_scale_(torch::Tensor y, double scale);"

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(
            name="ks_cublas_gemm_after",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=['relu_scale_'],
            extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
            verbose=False,
        )
    return _EXT


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _ext()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # cuBLAS SGEMM (library call by design; TF32 stays off unless the task's tolerance allows it)
        c = torch.matmul(a.contiguous(), b.contiguous())
        return _ext().relu_scale_(c, 0.5)
