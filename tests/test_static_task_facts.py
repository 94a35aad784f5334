"""Facts a static query reads from the task next to the kernel: a launch's grid from the host code and the
task's shapes (retrieval/launch_grid.py) and what a grid with fewer blocks than SMs means, and a batch norm
with fixed statistics after a convolution (foldable into its weights). Kernels and tasks written here, the
real query over a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.config import load_settings
from kernelskill.retrieval.api import query
from kernelskill.retrieval.launch_grid import launch_grid

ROW_KERNEL = r'''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#define THREADS 512

__global__ void row_scale_kernel(const float* x, float* y, int cols) {
    __shared__ float part[32];
    const float* row = x + (long)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += fabsf(row[c]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) { float t = 0.f; for (int w = 0; w < blockDim.x / 32; ++w) t += part[w]; part[0] = t; }
    __syncthreads();
    float inv = 1.f / part[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[(long)blockIdx.x * cols + c] = row[c] * inv;
}

torch::Tensor row_scale(torch::Tensor w, torch::Tensor x) {
    const int64_t rows = x.size(0), cols = x.size(-1);
    auto y = torch::empty_like(x);
    row_scale_kernel<<<rows, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""
_ext = load_inline(name="rs", cpp_sources="", cuda_sources=CUDA_SRC, functions=[])


class ModelNew(nn.Module):
    def forward(self, x, w):
        return _ext.row_scale(w, x.contiguous())
'''

ROW_TASK = '''
import torch
import torch.nn as nn

BATCH = 2 ** 3


class Model(nn.Module):
    def forward(self, x, w):
        return x / x.abs().sum(dim=1, keepdim=True) + 0 * w.sum()


def get_inputs():
    return [torch.randn(BATCH, 1 << 21), torch.randn(4)]


def get_init_inputs():
    return []
'''

TILE_KERNEL = r'''
CUDA_SRC = r"""
#define TILE 32
constexpr int ROWS_PER_THREAD = 4;
__global__ void mm_kernel(const float* a, const float* b, float* c, int m, int n, int k) {}
torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
    int m = a.size(0);
    int k = a.size(1), n = b.size(1);
    dim3 block(TILE, TILE / ROWS_PER_THREAD);
    dim3 grid(at::ceil_div(n, TILE), std::min(m / TILE, 65535));
    mm_kernel<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), nullptr, m, n, k);
    return a;
}
"""
'''

TILE_TASK = '''
import torch


def get_inputs():
    return [torch.randn(256, 4096), torch.randn(4096, 96)]
'''


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_block_per_row_grid_is_sized_through_the_forward_arguments(tmp_path: Path) -> None:
    """``row_scale(w, x)`` is called with the forward's (x, w) swapped: x.size(0) is the task's 8 rows."""
    facts = launch_grid(ROW_KERNEL, _write(tmp_path, "task.py", ROW_TASK))
    assert facts.blocks == 8
    assert "row_scale_kernel<<<rows, ...>>> in row_scale = 8 blocks" in facts.why


def test_dim3_grids_with_file_constants_and_helpers(tmp_path: Path) -> None:
    facts = launch_grid(TILE_KERNEL, _write(tmp_path, "task.py", TILE_TASK))
    assert facts.blocks == 3 * 8  # ceil(96 / 32) x min(256 / 32, 65535)


def test_a_grid_assigned_twice_or_from_an_unknown_call_is_not_guessed(tmp_path: Path) -> None:
    task = _write(tmp_path, "task.py", TILE_TASK)
    twice = TILE_KERNEL.replace("mm_kernel<<<", "if (m > 128) grid = dim3(1);\n    mm_kernel<<<")
    assert launch_grid(twice, task).blocks is None
    opaque = TILE_KERNEL.replace("at::ceil_div(n, TILE)", "pick_blocks(n)")
    facts = launch_grid(opaque, task)
    assert facts.blocks is None and "unknown" in facts.why
    assert launch_grid(TILE_KERNEL, _write(tmp_path, "t2.py", "def get_inputs():\n    return [make()]\n")).blocks \
        is None


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    from kernelskill.kb.home import open_store

    home = tmp_path_factory.mktemp("grid_home")
    open_store(load_settings(home=home)).close()
    return load_settings(home=home)


def test_a_static_query_with_fewer_blocks_than_sms_is_an_underfilled_grid(tmp_path: Path, settings) -> None:
    kernel = _write(tmp_path, "row_kernel.py", ROW_KERNEL)
    r = query(kernel, task=_write(tmp_path, "task.py", ROW_TASK), settings=settings)
    assert r.context["launch_grid_blocks"] == 8 and r.context["device_sm_count"] == 132
    assert r.bottleneck.id == "underfilled_grid" and "grid_below_sms" in r.bottleneck.reason
    assert r.case.id == "ug_reduction" and r.permitted[0].id in {"block_reduction", "launch_config_tuning"}
    # the same kernel over many rows fills the GPU: the static fallback answers, no bottleneck is named
    wide = _write(tmp_path, "wide_task.py", ROW_TASK.replace("BATCH = 2 ** 3", "BATCH = 4096"))
    r = query(kernel, task=wide, settings=settings)
    assert r.context["launch_grid_blocks"] == 4096 and r.bottleneck.id is None
    # without a task there are no shapes: no grid, no forcing
    assert "launch_grid_blocks" not in query(kernel, settings=settings).context


CONV_BN_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w, gamma, beta, mean, var):
        y = torch.nn.functional.conv2d(x, w, padding=1)
        y = torch.nn.functional.batch_norm(y, mean, var, gamma, beta, training=TRAINING, eps=1e-5)
        return torch.relu(y)


def get_inputs():
    return [torch.randn(8, 32, 28, 28), torch.randn(32, 32, 3, 3), torch.rand(32), torch.randn(32),
            torch.randn(32), torch.rand(32) + 0.5]


def get_init_inputs():
    return []
'''

CONV_BN_KERNEL = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void affine_relu_kernel(const float* x, const float* s, const float* t, float* y, int C, int HW, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int c = (i / HW) % C;
    float v = x[i] * s[c] + t[c];
    y[i] = v > 0.f ? v : 0.f;
}
torch::Tensor affine_relu(torch::Tensor x, torch::Tensor s, torch::Tensor t) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    affine_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), s.data_ptr<float>(), t.data_ptr<float>(),
        y.data_ptr<float>(), x.size(1), x.size(2) * x.size(3), n);
    return y;
}
"""
_ext = load_inline(name="ar", cpp_sources="", cuda_sources=CUDA_SRC, functions=[])


class ModelNew(nn.Module):
    def forward(self, x, w, gamma, beta, mean, var):
        y = torch.nn.functional.conv2d(x, w, padding=1)
        s = gamma / torch.sqrt(var + 1e-5)
        return _ext.affine_relu(y, s, beta - mean * s)
'''


def test_an_eval_mode_norm_after_a_conv_is_folded_first(tmp_path: Path, settings) -> None:
    """A batch norm with fixed statistics after a convolution is a per-channel affine map: the static answer
    puts folding it into the weights first; batch statistics (training=True) do not fold."""
    kernel = _write(tmp_path, "conv_bn_kernel.py", CONV_BN_KERNEL)
    r = query(kernel, task=_write(tmp_path, "task.py", CONV_BN_TASK.replace("TRAINING", "False")), settings=settings)
    assert r.context["op_norm_foldable"] is True and r.context["single_custom_launch"] is False
    assert r.case.id == "fs4_fold_eval_norm" and r.permitted[0].id == "algebraic_simplification"
    r = query(kernel, task=_write(tmp_path, "train.py", CONV_BN_TASK.replace("TRAINING", "True")), settings=settings)
    assert r.context["op_norm_foldable"] is False and r.case.id != "fs4_fold_eval_norm"


def test_a_profile_names_its_gpu_and_the_routes_use_that_gpu(tmp_path: Path, settings) -> None:
    """A blind kernel profiled on an H100: ncu's device__attribute_display_name picks the H100's ceilings
    (3.0 TB/s copy, not the H200's 4.3) for the routes, and its SM count for the grid."""
    from kernelskill.retrieval.profile import load_profile

    blind = Path(__file__).resolve().parent / "data" / "blind"
    kid = "bl01_scale_shift_relu"
    profile = blind / "profiles" / f"{kid}.csv"
    assert load_profile(profile).device_name == "NVIDIA H100 80GB HBM3"
    r = query(blind / f"{kid}_kernel.py", task=blind / f"{kid}_task.py", profile=profile, settings=settings)
    assert r.routes is not None and r.routes.device.startswith("NVIDIA H100")
    assert r.context["device_sm_count"] == 132
    static = query(blind / f"{kid}_kernel.py", task=blind / f"{kid}_task.py", settings=settings)
    assert static.routes is not None and static.routes.device == "NVIDIA H200"  # the arch's default
