"""On a GPU: a scripted run whose answers are real kernels, measured by the real harness.

The LLM's answers come from the local test server (the real openai client over HTTP); the evaluator is
the real harness (``HarnessEvaluator``: build, verify, time, profile). The knowledge base cannot run on
the GPU box (no chromadb, no bundled embedding model there), so the query seam uses the stand-in
retriever of ``test_loop_helpers``. The seed does not compile, the repair is correct but unfused (three
passes over memory), the optimization fuses the three passes into one vectorised pass. The test asserts
that the loop reports exactly the speedups the harness measured.

Set ``KS_GPU_OUT`` to a folder to keep the run's report, trajectory and log there.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kernelskill.config import HarnessSettings, LLMSettings
from kernelskill.pipeline.loop import HarnessEvaluator, Loop, LoopOptions, eval_view
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import RunStore
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import DIAGNOSIS, StandInRetriever, fenced, planner_answer, review

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0


def get_inputs():
    return [torch.rand(8192, 4096)]


def get_init_inputs():
    return []
'''

_PRELUDE = '''import torch
from kernelskill.pipeline.harness.fastpath import CudaModule
'''

SEED = _PRELUDE + '''
SRC = r"""
extern "C" __global__ void relu2p1(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx_x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f) * 2.f + 1.f;
}
"""
_k = CudaModule(SRC, name="relu2p1_seed").kernel("relu2p1", "ptr,ptr,i64")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _k(((n + 255) // 256,), (256,), [x, y, n])
        return y
'''

UNFUSED = _PRELUDE + '''
SRC = r"""
extern "C" __global__ void relu_k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
extern "C" __global__ void scale_k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 2.f;
}
extern "C" __global__ void shift_k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.f;
}
"""
_m = CudaModule(SRC, name="relu2p1_unfused")
_relu, _scale, _shift = (_m.kernel(k, "ptr,ptr,i64") for k in ("relu_k", "scale_k", "shift_k"))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n = x.numel()
        grid = ((n + 255) // 256,)
        a = torch.empty_like(x)
        b = torch.empty_like(x)
        y = torch.empty_like(x)
        _relu(grid, (256,), [x, a, n])
        _scale(grid, (256,), [a, b, n])
        _shift(grid, (256,), [b, y, n])
        return y
'''

FUSED = _PRELUDE + '''
SRC = r"""
extern "C" __global__ void relu2p1_vec(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long n4 = n / 4;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long i = t; i < n4; i += stride) {
        float4 v = x4[i];
        v.x = fmaxf(v.x, 0.f) * 2.f + 1.f;
        v.y = fmaxf(v.y, 0.f) * 2.f + 1.f;
        v.z = fmaxf(v.z, 0.f) * 2.f + 1.f;
        v.w = fmaxf(v.w, 0.f) * 2.f + 1.f;
        y4[i] = v;
    }
    for (long long i = n4 * 4 + t; i < n; i += stride) y[i] = fmaxf(x[i], 0.f) * 2.f + 1.f;
}
extern "C" __global__ void relu2p1(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f) * 2.f + 1.f;
}
"""
_m = CudaModule(SRC, name="relu2p1_fused")
_vec, _scalar = _m.kernel("relu2p1_vec", "ptr,ptr,i64"), _m.kernel("relu2p1", "ptr,ptr,i64")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0:
            blocks = max(1, min((n // 4 + 255) // 256, 132 * 16))
            _vec((blocks,), (256,), [x, y, n])
        else:
            _scalar(((n + 255) // 256,), (256,), [x, y, n])
        return y
'''

SCRIPT = {
    "r00.generate.1": [fenced(SEED)],
    "r01.diagnose.1": [DIAGNOSIS],
    "r01.repair.1": [fenced(UNFUSED)],
    "r02.plan.1": [planner_answer("kernel_fusion", "fuse relu, scale and shift into one float4 pass")],
    "r02.optimize.1": [fenced(FUSED)],
    "r02.review.1": [review(True)],
}


@pytest.mark.gpu
def test_scripted_run_with_real_kernels_reports_the_measured_speedup(tmp_path: Path) -> None:
    task = tmp_path / "relu_scale_shift.py"
    task.write_text(TASK)
    evaluator = HarnessEvaluator(HarnessSettings())
    evaluator.check()
    options = LoopOptions(rounds=2, verify_candidates=1)
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(SCRIPT) as server:
        llm = LLMClient.from_settings(LLMSettings(base_url=server.base_url, api_key="sk-test", model="test-model",
                                                  backoff_s=0.01))
        result = Loop(run, llm, evaluator, StandInRetriever(), options).execute()
        assert sorted(server.steps()) == sorted(SCRIPT)

    out = os.environ.get("KS_GPU_OUT")
    if out:
        for name in ("report.md", "trajectory.json", "events.jsonl"):
            if (run.path / name).exists():
                shutil.copy(run.path / name, Path(out) / f"gpu_run_{name}")
    evals = {e["step"]: eval_view(e["data"]["result"]) for e in run.log.of_type("eval")}
    print(json.dumps({k: {f: v[f] for f in ("status", "speedup", "candidate_ms", "baseline_ms")}
                      for k, v in evals.items()}, indent=1))
    assert evals["r00.eval"]["status"] == "compile_error"
    assert evals["r01.eval"]["correct"], evals["r01.eval"]["message"]
    assert evals["r02.eval"]["correct"], evals["r02.eval"]["message"]
    assert evals["r02.eval"]["speedup"] > 1.5 * evals["r01.eval"]["speedup"]  # measurably faster
    assert result.best is not None and result.verified
    assert result.best["candidate"] == "candidates/r02.optimize.py"
    assert result.best["speedup"] == evals["r02.eval"]["speedup"]
    assert result.best["verified_speedup"] == evals["verify.r02.optimize"]["speedup"]
    assert f"{evals['r02.eval']['speedup']:.3f}" in (run.path / "report.md").read_text()
