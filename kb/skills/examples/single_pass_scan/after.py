"""single_pass_scan, after: one pass with decoupled look-back (Merrill and Garland's single-pass scan).

Each 4096-element tile is read once, scanned in registers, gets its exclusive prefix from already
published predecessors (aggregate or inclusive prefix, status and value in one 64-bit flag), and is
written once: 2 x 256 MB of traffic. Tile ids come from an atomic counter so a tile never waits on a
block that has not started; flags and counter are reset by one memset per call.
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

#define ST_EMPTY 0ull
#define ST_AGGREGATE 1ull   // the tile's own total is published
#define ST_PREFIX 2ull      // the inclusive prefix up to and including the tile is published

__device__ __forceinline__ void publish(unsigned long long* flag, unsigned long long status, float value) {
    // status and value in one aligned 64-bit word: a reader sees both or neither
    *reinterpret_cast<volatile unsigned long long*>(flag) = (status << 32) | __float_as_uint(value);
}

// One pass, decoupled look-back: tiles take ids from an atomic counter in launch order (so every
// predecessor is already running), publish their aggregate at once, and thread 0 walks back over
// predecessors' aggregates until it meets a published prefix.
__global__ void __launch_bounds__(THREADS) scan_single_pass(const float* __restrict__ x, float* __restrict__ y,
                                                            unsigned long long* __restrict__ flags,
                                                            unsigned* __restrict__ counter, long cols, int tiles) {
    __shared__ float sh_warp[32];
    __shared__ float sh_excl;
    __shared__ int sh_tile;
    if (threadIdx.x == 0) sh_tile = (int)atomicAdd(counter, 1u);
    __syncthreads();
    int tile = sh_tile, r = tile / tiles, t = tile % tiles;
    long off = (long)t * TILE, n = min((long)TILE, cols - off);
    float v[ITEMS];
    load_tile(x + r * cols + off, n, v);
    float agg = block_scan_tile(v, sh_warp);
    if (threadIdx.x == 0) {
        float excl = 0.f;
        if (t == 0) {
            publish(&flags[tile], ST_PREFIX, agg);
        } else {
            publish(&flags[tile], ST_AGGREGATE, agg);
            int j = tile - 1;
            while (true) {
                unsigned long long f = *reinterpret_cast<volatile unsigned long long*>(&flags[j]);
                unsigned long long st = f >> 32;
                if (st == ST_EMPTY) continue;                 // predecessor still scanning its tile
                excl += __uint_as_float((unsigned)(f & 0xffffffffull));
                if (st == ST_PREFIX) break;
                --j;                                          // aggregate only: keep walking back
            }
            publish(&flags[tile], ST_PREFIX, excl + agg);
        }
        sh_excl = excl;
    }
    __syncthreads();
    float e = sh_excl;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) v[j] += e;
    store_tile(y + r * cols + off, n, v);
}

torch::Tensor cumsum_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32 && x.dim() == 2, "x: 2-D float32 CUDA");
    x = x.contiguous();
    int rows = x.size(0);
    long cols = x.size(1);
    TORCH_CHECK(cols % 4 == 0, "cols % 4 == 0 (aligned float4 rows)");
    auto y = torch::empty_like(x);
    if (cols == 0 || rows == 0) return y;
    int tiles = (int)((cols + TILE - 1) / TILE);
    long total = (long)tiles * rows;
    TORCH_CHECK(total < (1L << 31), "too many tiles");
    // flags (one 64-bit word per tile) + the tile counter, zeroed on the stream before every launch
    auto ws = torch::empty({total + 1}, x.options().dtype(torch::kInt64));
    cudaMemsetAsync(ws.data_ptr<int64_t>(), 0, (total + 1) * sizeof(int64_t));
    auto* flags = reinterpret_cast<unsigned long long*>(ws.data_ptr<int64_t>());
    scan_single_pass<<<(unsigned)total, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), flags,
                                                   reinterpret_cast<unsigned*>(flags + total), cols, tiles);
    return y;
}
"""

CPP_SRC = "torch::Tensor cumsum_rows(torch::Tensor x);"

_ext = load_inline(
    name="kb_single_pass_scan_after",
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
