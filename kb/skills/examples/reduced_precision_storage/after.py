"""reduced_precision_storage, after: keep a half-precision copy of the table, accumulate in fp32.

The table is stored in fp16 (values ~N(0, 1): no range problem, and fp16's 11-bit mantissa keeps the
16-term sums within ~3e-3 of fp32, while bf16's 8 bits would not meet atol=1e-2 over 8M outputs). The
copy is refreshed whenever the parameter changes (pointer or version counter), so training or
load_state_dict cannot leave it stale. Each lookup now moves 256 bytes instead of 512.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void to_half(const float4* __restrict__ src, uint2* __restrict__ dst, long n4) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = src[i];
    __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    dst[i] = make_uint2(*reinterpret_cast<unsigned*>(&lo), *reinterpret_cast<unsigned*>(&hi));
}

__global__ void bag_sum_f16(const uint2* __restrict__ table, const long* __restrict__ idx,
                            float4* __restrict__ out, int bags, int bag, int d4, long rows) {
    int b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (b >= bags) return;
    for (int c = lane; c < d4; c += 32) {
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int l = 0; l < bag; ++l) {
            long r = idx[(long)b * bag + l];
            if (r < 0 || r >= rows) continue;
            uint2 raw = table[r * d4 + c];                 // 4 halves = 8 bytes
            float2 lo = __half22float2(*reinterpret_cast<__half2*>(&raw.x));
            float2 hi = __half22float2(*reinterpret_cast<__half2*>(&raw.y));
            acc.x += lo.x; acc.y += lo.y; acc.z += hi.x; acc.w += hi.y;
        }
        out[(long)b * d4 + c] = acc;
    }
}

torch::Tensor make_half_table(torch::Tensor table) {
    TORCH_CHECK(table.is_cuda() && table.dtype() == torch::kFloat32 && table.size(1) % 4 == 0, "table: float32, dim % 4 == 0");
    table = table.contiguous();
    auto half = torch::empty(table.sizes(), table.options().dtype(torch::kFloat16));
    long n4 = table.numel() / 4;
    to_half<<<(unsigned)((n4 + 255) / 256), 256>>>(reinterpret_cast<const float4*>(table.data_ptr<float>()),
                                                  reinterpret_cast<uint2*>(half.data_ptr<at::Half>()), n4);
    return half;
}

torch::Tensor bag_sum(torch::Tensor half_table, torch::Tensor idx) {
    TORCH_CHECK(half_table.dtype() == torch::kFloat16 && half_table.is_contiguous(), "half table");
    TORCH_CHECK(idx.dtype() == torch::kInt64 && idx.dim() == 2, "idx: 2-D int64");
    idx = idx.contiguous();
    int bags = idx.size(0), bag = idx.size(1), d = half_table.size(1);
    auto out = torch::empty({bags, d}, half_table.options().dtype(torch::kFloat32));
    bag_sum_f16<<<(bags + 7) / 8, 256>>>(reinterpret_cast<const uint2*>(half_table.data_ptr<at::Half>()), idx.data_ptr<long>(),
                                         reinterpret_cast<float4*>(out.data_ptr<float>()), bags, bag, d / 4, half_table.size(0));
    return out;
}
"""

CPP_SRC = "torch::Tensor make_half_table(torch::Tensor table);\ntorch::Tensor bag_sum(torch::Tensor half_table, torch::Tensor idx);"

_ext = load_inline(
    name="kb_reduced_precision_storage_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["make_half_table", "bag_sum"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.table = nn.Embedding(num_embeddings, dim)
        self._half = None
        self._half_key = None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        w = self.table.weight
        key = (w.data_ptr(), w._version, w.device)
        if self._half_key != key:          # refresh the fp16 copy only when the parameter changed
            self._half = _ext.make_half_table(w.detach())
            self._half_key = key
        return _ext.bag_sum(self._half, idx)
