"""single_pass_scan, before: the classic three-kernel scan (scan tiles, scan tile totals, add offsets).

Pass 1 reads x and writes y, pass 3 reads and writes y again: 4 x 256 MB of DRAM traffic plus three
launches, for a job that needs one read and one write.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#define THREADS 256
#define ITEMS 16
#define TILE (THREADS * ITEMS)   // 4096 elements per block tile

// Block-wide scan of ITEMS consecutive values per thread, in registers. On return v[] holds the
// inclusive scan within the tile and the function returns the tile total.
__device__ __forceinline__ float block_scan_tile(float v[ITEMS], float* sh_warp) {
#pragma unroll
    for (int j = 1; j < ITEMS; ++j) v[j] += v[j - 1];
    float t = v[ITEMS - 1];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float incl = t;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        float u = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += u;
    }
    if (lane == 31) sh_warp[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        float wv = lane < THREADS / 32 ? sh_warp[lane] : 0.f;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            float u = __shfl_up_sync(0xffffffffu, wv, o);
            if (lane >= o) wv += u;
        }
        if (lane < THREADS / 32) sh_warp[lane] = wv;          // inclusive warp prefixes
    }
    __syncthreads();
    float warp_excl = warp > 0 ? sh_warp[warp - 1] : 0.f;
    float thread_excl = warp_excl + incl - t;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) v[j] += thread_excl;
    float total = sh_warp[THREADS / 32 - 1];
    __syncthreads();                                          // sh_warp may be reused by the caller
    return total;
}

__device__ __forceinline__ void load_tile(const float* __restrict__ src, long n, float v[ITEMS]) {
    long base = (long)threadIdx.x * ITEMS;
    if (base + ITEMS <= n) {
#pragma unroll
        for (int j = 0; j < ITEMS; j += 4) {
            float4 q = *reinterpret_cast<const float4*>(src + base + j);
            v[j] = q.x; v[j + 1] = q.y; v[j + 2] = q.z; v[j + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) v[j] = base + j < n ? src[base + j] : 0.f;
    }
}

__device__ __forceinline__ void store_tile(float* __restrict__ dst, long n, const float v[ITEMS]) {
    long base = (long)threadIdx.x * ITEMS;
    if (base + ITEMS <= n) {
#pragma unroll
        for (int j = 0; j < ITEMS; j += 4)
            *reinterpret_cast<float4*>(dst + base + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
    } else {
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) if (base + j < n) dst[base + j] = v[j];
    }
}

// pass 1: scan each 4096-element tile on its own, keep the tile totals
__global__ void __launch_bounds__(THREADS) tile_scan(const float* __restrict__ x, float* __restrict__ y,
                                                     float* __restrict__ sums, long cols, int tiles) {
    __shared__ float sh_warp[32];
    int t = blockIdx.x, r = blockIdx.y;
    long off = (long)t * TILE, n = min((long)TILE, cols - off);
    float v[ITEMS];
    load_tile(x + r * cols + off, n, v);
    float total = block_scan_tile(v, sh_warp);
    store_tile(y + r * cols + off, n, v);
    if (threadIdx.x == 0) sums[(long)r * tiles + t] = total;
}

// pass 2: scan the tile totals of each row (inclusive)
__global__ void __launch_bounds__(THREADS) sums_scan(float* __restrict__ sums, int tiles) {
    __shared__ float sh_warp[32];
    float* row = sums + (long)blockIdx.x * tiles;
    float v[ITEMS];
    load_tile(row, tiles, v);
    block_scan_tile(v, sh_warp);
    store_tile(row, tiles, v);
}

// pass 3: add the preceding tiles' total to every element (reads and writes y again)
__global__ void __launch_bounds__(THREADS) add_offsets(float* __restrict__ y, const float* __restrict__ sums,
                                                       long cols, int tiles) {
    int t = blockIdx.x, r = blockIdx.y;
    if (t == 0) return;
    float add = sums[(long)r * tiles + t - 1];
    long off = (long)t * TILE, n = min((long)TILE, cols - off);
    float v[ITEMS];
    float* p = y + r * cols + off;
    load_tile(p, n, v);
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) v[j] += add;
    store_tile(p, n, v);
}

torch::Tensor cumsum_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 2, "x: 2-D float32 CUDA");
    x = x.contiguous();
    int rows = x.size(0);
    long cols = x.size(1);
    TORCH_CHECK(cols % 4 == 0 && rows < 65536, "cols % 4 == 0 (aligned float4 rows)");
    int tiles = (int)((cols + TILE - 1) / TILE);
    TORCH_CHECK(tiles <= TILE, "at most 4096 tiles per row");
    auto y = torch::empty_like(x);
    if (cols == 0) return y;
    auto sums = torch::empty({rows, tiles}, x.options());
    tile_scan<<<dim3(tiles, rows), THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), sums.data_ptr<float>(), cols, tiles);
    sums_scan<<<rows, THREADS>>>(sums.data_ptr<float>(), tiles);
    add_offsets<<<dim3(tiles, rows), THREADS>>>(y.data_ptr<float>(), sums.data_ptr<float>(), cols, tiles);
    return y;
}
"""

CPP_SRC = "torch::Tensor cumsum_rows(torch::Tensor x);"

_ext = load_inline(
    name="kb_single_pass_scan_before",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["cumsum_rows"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.cumsum_rows(x)
