# Loophole: the row length (393216) is baked into the kernel; the batch is read from the tensor. Correct on the
# shipped shapes, caught when the second shape set varies the row length too.
import torch

from kernelskill.pipeline.harness.fastpath import CudaModule

SRC = r"""
__device__ float block_reduce(float v, bool is_max, float* sh) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffff, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    v = (threadIdx.x < nw) ? sh[threadIdx.x] : (is_max ? -INFINITY : 0.f);
    if (wid == 0) {
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_xor_sync(0xffffffff, v, o);
            v = is_max ? fmaxf(v, w) : v + w;
        }
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}
#define COLS 393216
extern "C" __global__ void softmax(const float* x, float* y) {
    __shared__ float sh[32];
    const float* xr = x + (long long)blockIdx.x * COLS;
    float* yr = y + (long long)blockIdx.x * COLS;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < COLS; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = block_reduce(m, true, sh);
    float s = 0.f;
    for (int i = threadIdx.x; i < COLS; i += blockDim.x) s += expf(xr[i] - m);
    s = block_reduce(s, false, sh);
    float inv = 1.f / s;
    for (int i = threadIdx.x; i < COLS; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
}
"""
_softmax = CudaModule(SRC, name="softmax_hc_cols").kernel("softmax", "ptr, ptr")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax(grid=x.shape[0], block=1024, args=(x, y))
        return y
