#include <torch/extension.h>

#define THREADS 512

__global__ void partial_max_kernel(const float* __restrict__ x, float* __restrict__ partial, int n) {
    __shared__ float smax[THREADS];
    int tid = threadIdx.x;
    float m = -INFINITY;
    for (int i = blockIdx.x * THREADS + tid; i < n; i += gridDim.x * THREADS) m = fmaxf(m, x[i]);
    smax[tid] = m;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) smax[tid] = fmaxf(smax[tid], smax[tid + s]);
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = smax[0];
}

__global__ void final_max_kernel(const float* __restrict__ partial, float* __restrict__ out, int num_blocks) {
    __shared__ float smax[THREADS];
    int tid = threadIdx.x;
    smax[tid] = tid < num_blocks ? partial[tid] : -INFINITY;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) smax[tid] = fmaxf(smax[tid], smax[tid + s]);
        __syncthreads();
    }
    if (tid == 0) out[0] = smax[0];
}

torch::Tensor global_max(torch::Tensor x) {
    const int blocks = 256;
    auto partial = torch::empty({blocks}, x.options());
    auto out = torch::empty({1}, x.options());
    partial_max_kernel<<<blocks, THREADS>>>(x.data_ptr<float>(), partial.data_ptr<float>(), x.numel());
    final_max_kernel<<<1, THREADS>>>(partial.data_ptr<float>(), out.data_ptr<float>(), blocks);
    return out;
}
