"""Routes before tactics and diagnoses that agree with their counters (issue 31, items 2 and 3), on kernels,
tasks and profiles that are not KB examples (tests/data/kb31; the profiles are synthetic, see
tests/data/kb31/make_profiles.py), through the real query over a real store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kernelskill.config import load_settings
from kernelskill.retrieval.api import query
from kernelskill.retrieval.routes import load_ceilings
from kernelskill.retrieval.work import estimate_work

ROOT = Path(__file__).resolve().parents[1]
D = ROOT / "tests" / "data" / "kb31"
GEMM_KERNEL, GEMM_TASK = D / "tiled_gemm_cp_async_kernel.py", D / "gemm_task.py"
ADD_KERNEL, ADD_TASK = D / "scale_add_kernel.py", D / "scale_add_task.py"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    from kernelskill.kb.home import open_store

    home = tmp_path_factory.mktemp("routes_home")
    open_store(load_settings(home=home)).close()
    return load_settings(home=home)


def test_coalesced_sectors_refute_uncoalesced_access(settings) -> None:
    r = query(GEMM_KERNEL, task=GEMM_TASK, profile=D / "profiles" / "tiled_gemm_coalesced.csv", settings=settings)
    assert r.profile.derived["global_sector_excess"] == pytest.approx(1.0)
    assert r.bottleneck.id == "onchip_operand_traffic"
    ua = next(c for c in r.bottleneck.candidates if c.id == "uncoalesced_access")
    assert ua.considered is False  # its signature is contradicted by the measured sectors
    step = next(s for s in r.trace if s.kind == "predicate" and s.id == "coalescing_not_refuted")
    # the measured counter decides; the source's access_unit_stride is read but cannot change it
    assert step.value is False and step.inputs["global_sector_excess"] == 1.0
    assert r.case.id == "ot_tiled_gemm"
    assert r.permitted[0].id == "register_blocking"
    assert "coalesced_access" not in [m.id for m in r.permitted]


def test_wasted_sectors_still_read_as_uncoalesced(settings) -> None:
    r = query(GEMM_KERNEL, task=GEMM_TASK, profile=D / "profiles" / "tiled_gemm_strided.csv", settings=settings)
    assert r.profile.derived["global_sector_excess"] == pytest.approx(3.0)
    assert r.bottleneck.id == "uncoalesced_access"


def test_methods_the_kernel_applies_are_shown_not_offered(settings) -> None:
    r = query(GEMM_KERNEL, task=GEMM_TASK, profile=D / "profiles" / "tiled_gemm_coalesced.csv", settings=settings)
    applied = {a.id: a for a in r.applied}
    assert {"cp_async_double_buffering", "occupancy_launch_bounds", "shared_memory_tiling"} <= set(applied)
    line = GEMM_KERNEL.read_text().splitlines()[applied["cp_async_double_buffering"].line - 1]
    assert "cp.async" in line
    assert not set(applied) & {m.id for m in r.permitted}


def test_gemm_routes_with_ceilings_under_the_strict_protocol(settings) -> None:
    r = query(GEMM_KERNEL, task=GEMM_TASK, profile=D / "profiles" / "tiled_gemm_coalesced.csv", settings=settings)
    rep = r.routes
    assert rep is not None and rep.op == "gemm" and rep.flops == 2.0 * 2048 ** 3
    by = {x.route: x for x in rep.routes}
    assert [x.route for x in rep.routes] == ["library", "library_compensated", "fused_epilogue", "tensor_core",
                                             "hand_tiles"]
    assert not by["library"].allowed and "no_library_when_forbidden" in by["library"].why_not  # strict: no cuBLAS
    assert by["tensor_core"].allowed and by["hand_tiles"].allowed
    assert rep.current_route == "hand_tiles" and by["hand_tiles"].current
    # fp32 CUDA cores at 60 TFLOP/s: 2 * 2048^3 / 60e12 s; EC-TF32 at a third of 495
    assert by["hand_tiles"].ceiling_ms == pytest.approx(2.0 * 2048 ** 3 / 60e12 * 1e3)
    assert by["tensor_core"].ceiling_ms == pytest.approx(2.0 * 2048 ** 3 / 165e12 * 1e3)
    assert rep.forward_ms == pytest.approx(1.45)
    assert by["hand_tiles"].pct_of_ceiling == pytest.approx(100 * by["hand_tiles"].ceiling_ms / 1.45, abs=0.1)
    assert rep.at_roofline is False and "tensor_core" in rep.verdict


def test_library_routes_allowed_under_kernelbench(settings) -> None:
    r = query(GEMM_KERNEL, task=GEMM_TASK, profile=D / "profiles" / "tiled_gemm_coalesced.csv", settings=settings,
              context={"library_calls_allowed": True})
    by = {x.route: x for x in r.routes.routes}
    assert by["library"].allowed and by["library_compensated"].allowed


def test_a_kernel_near_its_ceiling_is_at_its_roofline(settings) -> None:
    near = query(ADD_KERNEL, task=ADD_TASK, profile=D / "profiles" / "scale_add_at_roofline.csv", settings=settings)
    far = query(ADD_KERNEL, task=ADD_TASK, profile=D / "profiles" / "scale_add_far.csv", settings=settings)
    ceiling = 3 * 8192 * 8192 * 4 / 4.3e12 * 1e3
    for r in (near, far):
        assert r.routes.op == "elementwise" and r.routes.current_route == "one_pass"
        assert r.routes.routes[0].ceiling_ms == pytest.approx(ceiling)
    assert near.routes.at_roofline and near.routes.routes[0].pct_of_ceiling >= 90
    assert "stop" in near.routes.verdict and any("roofline" in n for n in near.notes)
    assert not far.routes.at_roofline and far.routes.routes[0].pct_of_ceiling < 40
    assert {"vectorized_access_16b", "grid_stride_loop"} <= {a.id for a in near.applied}


def test_static_work_estimates() -> None:
    assert estimate_work(GEMM_TASK).flops == 2.0 * 2048 ** 3
    w = estimate_work(D / "linear_swish_task.py")
    assert w.flops == 2.0 * 1024 * 8192 * 8192 and "Linear" in w.how
    assert estimate_work(ADD_TASK).bytes == 3 * 8192 * 8192 * 4
    assert estimate_work(D / "cumsum_task.py", op="reduction").bytes == 128 * 65536 * 4


def test_static_work_reads_shifts_and_powers(tmp_path: Path) -> None:
    """Sizes written as ``1 << 20`` or ``2 ** 12`` (common in task files) are sized, not left unknown."""
    task = tmp_path / "wide_task.py"
    task.write_text("import torch\nimport torch.nn as nn\nROWS = 2 ** 4\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return x / x.norm(dim=1, keepdim=True)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(ROWS, 1 << 20)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    w = estimate_work(task)
    assert w.inputs == [[16, 1 << 20]] and w.bytes == 2 * 16 * (1 << 20) * 4


def test_device_rates_agree_with_the_harness_facts() -> None:
    """The ceilings model carries the same GPU numbers as the harness's speed-of-light check (read as data)."""
    harness = json.loads((ROOT / "pipeline" / "harness" / "gpus.json").read_text())["gpus"]
    ours = load_ceilings()["devices"]
    for key, dev in ours.items():
        for fact in ("sm_count", "copy_tb_s", "fp32_tflops", "tf32_tflops", "bf16_tflops"):
            assert dev[fact] == harness[key][fact], (key, fact)
    assert yaml.safe_load((ROOT / "retrieval" / "route_ceilings.yaml").read_text())["at_roofline_pct"] == 90


def test_the_planner_sees_the_routes_the_roofline_and_what_the_parent_applies(settings) -> None:
    """The planner prompt (``prompts render``, the loop's own rendering) carries the routes with their ceilings,
    the parent's standing against its route, the at-roofline advice, and the methods the parent applies."""
    from kernelskill.commands.prompts import render_step

    near = render_step(settings, ADD_TASK, step="plan", candidate=ADD_KERNEL,
                       profile=D / "profiles" / "scale_add_at_roofline.csv")
    text = near["messages"][-1]["content"]
    assert "## Routes for the operation that holds the time (elementwise" in text
    assert "one_pass (the parent's route): ceiling" in text
    assert "The parent is at its route's roofline" in text and "change route" in text
    assert "Already applied by the parent (not offered again):" in text and "`vectorized_access_16b`" in text

    gemm = render_step(settings, GEMM_TASK, step="plan", candidate=GEMM_KERNEL,
                       profile=D / "profiles" / "tiled_gemm_coalesced.csv")
    text = gemm["messages"][-1]["content"]
    assert "- tensor_core: ceiling" in text and "not allowed here" in text  # libraries forbidden under strict
    assert "`cp_async_double_buffering`" in text.split("Already applied by the parent")[1].split("\n")[0]
    assert "roofline: tuning it further" not in text


def test_the_query_command_shows_the_routes_and_what_is_applied(settings) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "kernelskill", "query", str(GEMM_KERNEL), "--task", str(GEMM_TASK),
                          "--profile", str(D / "profiles" / "tiled_gemm_coalesced.csv"), "--home", str(settings.home)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "routes for gemm" in out.stdout and "hand_tiles (current)" in out.stdout
    assert "the best allowed route is tensor_core" in out.stdout
    assert "already applied (not offered again): cp_async_double_buffering (line" in out.stdout


TRANSPOSE = """
#define TILE 32
__global__ void t(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE%s];
    tile[threadIdx.y][threadIdx.x] = in[blockIdx.y * TILE * cols + threadIdx.y * cols + threadIdx.x];
    __syncthreads();
    out[threadIdx.y * rows + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}
"""


def test_a_shared_tile_transpose_and_its_padding_are_seen_as_applied() -> None:
    from kernelskill.retrieval.applied import applied_methods

    plain = applied_methods(TRANSPOSE % "", {})
    assert "shared_memory_transpose" in plain and "bank_conflict_avoidance" not in plain
    assert "__shared__ float tile" in plain["shared_memory_transpose"].evidence
    padded = applied_methods(TRANSPOSE % " + 1", {})
    assert {"shared_memory_transpose", "bank_conflict_avoidance"} <= set(padded)
    # a row-wise read of a shared tile is no transpose
    assert "shared_memory_transpose" not in applied_methods(
        (TRANSPOSE % "").replace("tile[threadIdx.x][threadIdx.y]", "tile[threadIdx.y][threadIdx.x]"), {})


PIECEWISE = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void act(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], r;
    if (v < -1.0f) r = %s;
    else if (v < 1.0f) r = v * 0.5f;
    else if (v < 4.0f) r = %s;
    else r = v;
    y[i] = r;
}
"""
_ext = load_inline(name="pw", cpp_sources="", cuda_sources=CUDA_SRC, functions=[])


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


def test_a_piecewise_map_with_transcendental_branches_gets_instruction_methods_first(settings, tmp_path) -> None:
    heavy = tmp_path / "heavy.py"
    heavy.write_text(PIECEWISE % ("expf(v) - 1.0f", "logf(1.0f + v) * tanhf(v)"))
    r = query(heavy, settings=settings)
    assert r.case.id == "fs0_piecewise_transcendental"
    assert [m.id for m in r.permitted][:2] == ["fast_math_intrinsics", "warp_uniform_control_flow"]
    # the same branches with no transcendental: a plain map, the memory-side steps first
    plain = tmp_path / "plain.py"
    plain.write_text(PIECEWISE % ("-1.0f", "v - 1.0f"))
    assert query(plain, settings=settings).case.id != "fs0_piecewise_transcendental"


PER_THREAD_GEMM = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void small_mm(const float* A, const float* B, float* C, int count) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    float a[16], b[16];
    for (int k = 0; k < 16; ++k) { a[k] = A[t * 16 + k]; b[k] = B[t * 16 + k]; }
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) {
            float s = 0.f;
            for (int k = 0; k < 4; ++k) s += a[r * 4 + k] * b[k * 4 + c];
            C[t * 16 + r * 4 + c] = s;
        }
}
"""
_ext = load_inline(name="smm", cpp_sources="", cuda_sources=CUDA_SRC, functions=[])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.small_mm(a, b)
'''


def test_a_gemm_per_thread_with_strided_lanes_gets_coalescing_before_register_tiles(tmp_path) -> None:
    from kernelskill.kb.home import open_store

    home = tmp_path / "home"
    open_store(load_settings(home=home)).close()
    kernel = tmp_path / "per_thread.py"
    kernel.write_text(PER_THREAD_GEMM)
    from kernelskill.protocols import load_protocol

    strict = load_protocol("strict").context("fp32")  # no library: the hand-written route is the answer
    r = query(kernel, settings=load_settings(home=home), context=strict)
    assert r.context["access_unit_stride"] is False
    assert r.case.id == "fs1_gemm_per_thread_strided"
    # staging through shared memory and lanes mapped to contiguous elements first (the ranking orders the two)
    assert {m.id for m in r.permitted[:2]} == {"coalesced_access", "shared_memory_tiling"}
    assert "register_blocking" not in [m.id for m in r.permitted[:2]]
