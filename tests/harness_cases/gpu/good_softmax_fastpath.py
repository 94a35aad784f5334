# Known good: row softmax over very wide rows (one block per row, block reductions).
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
extern "C" __global__ void softmax(const float* x, float* y, int cols) {
    __shared__ float sh[32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = block_reduce(m, true, sh);
    float s = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) s += expf(xr[i] - m);
    s = block_reduce(s, false, sh);
    float inv = 1.f / s;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
}
"""
_softmax = CudaModule(SRC, name="softmax").kernel("softmax", "ptr, ptr, i32")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax(grid=x.shape[0], block=1024, args=(x, y, x.shape[1]))
        return y
