#include <cuda_runtime.h>
#include <cuda_fp16.h>

namespace ops {
namespace detail {

constexpr int kThreads = 256;

__device__ inline float silu(float v)
{
    return v / (1.0f + expf(-v));
}

}  // namespace detail

extern "C" __global__ void __launch_bounds__(256)
swiglu_kernel(const half* __restrict__ gate,
              const half* __restrict__ up,
              half* __restrict__ out,
              int n)
{
    int i = blockIdx.x * detail::kThreads + threadIdx.x;
    if (i >= n)
    {
        return;
    }
    float g = __half2float(gate[i]);
    float u = __half2float(up[i]);
    out[i] = __float2half(detail::silu(g) * u);
}

void swiglu(const half* gate, const half* up, half* out, int n, cudaStream_t stream)
{
    swiglu_kernel<<<(n + detail::kThreads - 1) / detail::kThreads, detail::kThreads, 0, stream>>>(gate, up, out, n);
}

}  // namespace ops
