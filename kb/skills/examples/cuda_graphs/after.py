"""cuda_graphs, after: the same 64 launches captured once into a CUDA graph and replayed.

The first call for a given shape/dtype/device captures the chain on a static input buffer; later calls
copy the input in, replay the graph (one submission for all 64 kernels) and return a fresh copy of the
static output, so no caller ever holds a buffer the next replay overwrites.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void step_kernel(const float* __restrict__ x, float* __restrict__ y,
                            const float* __restrict__ a, const float* __restrict__ b, int i, long n) {
    long j = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) y[j] = tanhf(x[j] * a[i] + b[i]);
}

// Runs all steps on `stream` (the caller's current stream, so the launches can be captured).
torch::Tensor chain(torch::Tensor x, torch::Tensor a, torch::Tensor b, int64_t stream) {
    TORCH_CHECK(x.is_cuda() && x.dtype() == torch::kFloat32, "x: float32 CUDA");
    auto s = reinterpret_cast<cudaStream_t>(stream);
    x = x.contiguous();
    long n = x.numel();
    auto p = torch::empty_like(x), q = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    unsigned blocks = (unsigned)((n + 255) / 256);
    int steps = a.numel();
    for (int i = 0; i < steps; ++i) {
        float* out = (i % 2 == 0 ? p : q).data_ptr<float>();
        step_kernel<<<blocks, 256, 0, s>>>(in, out, a.data_ptr<float>(), b.data_ptr<float>(), i, n);
        in = out;
    }
    return steps % 2 == 1 ? p : q;
}
"""

CPP_SRC = "torch::Tensor chain(torch::Tensor x, torch::Tensor a, torch::Tensor b, int64_t stream);"

_ext = load_inline(
    name="kb_cuda_graphs_after",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["chain"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)

STEPS = 64


class ModelNew(nn.Module):
    def __init__(self, steps: int = STEPS):
        super().__init__()
        self.a = nn.Parameter(torch.rand(steps) * 0.5 + 0.75)
        self.b = nn.Parameter(torch.randn(steps) * 0.1)
        self._graphs: dict = {}

    def _capture(self, x: torch.Tensor):
        static_x = x.detach().clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture (allocator, lazy module load)
            _ext.chain(static_x, self.a, self.b, side.cuda_stream)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = _ext.chain(static_x, self.a, self.b, torch.cuda.current_stream().cuda_stream)
        return graph, static_x, static_y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # parameters are read through their device pointers: replace them and the graph must be redone
        key = (tuple(x.shape), x.dtype, x.device, self.a.data_ptr(), self.b.data_ptr())
        if key not in self._graphs:
            self._graphs[key] = self._capture(x)
        graph, static_x, static_y = self._graphs[key]
        static_x.copy_(x)
        graph.replay()
        return static_y.clone()
