"""On a GPU: the loop with Triton candidates (``candidate_format="triton"``), measured by the real harness.

As in ``test_loop_gpu``, the LLM's answers come from the local test server and the query seam is the stand-in
retriever; the evaluator is the real harness. The seed's Triton kernel does not compile, the repair is
correct but unfused (three kernels, three passes over memory) and the optimization fuses them into one
autotuned kernel. The test asserts that the loop reports exactly the speedups the harness measured, and that
the harness judges Triton candidates by the same rules as CUDA ones: torch computing the op is rejected, and
a ``tl.dot`` left at its TF32 default fails an fp32 task under the strict protocol while the IEEE one passes
(on integer-valued inputs, where fp32 sums are exact: with random normal inputs and K = 2048 a correct IEEE
kernel differed from cuBLAS by up to 4.4e-4 on 4 of 1M elements, beyond atol 1e-4, on the H200).

Set ``KS_GPU_OUT`` to a folder to keep the run's report and the measured figures there.
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
from tests.test_loop_helpers import StandInRetriever, fenced, planner_answer, review

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0


def get_inputs():
    return [torch.rand(8192, 4096) - 0.5]


def get_init_inputs():
    return []
'''

_PRELUDE = '''import torch
import triton
import triton.language as tl
'''

#: ``tl.lod`` does not exist: the Triton compiler refuses the kernel at its first launch
SEED = _PRELUDE + '''

@triton.jit
def relu2p1_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.lod(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2.0 + 1.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu2p1_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''

UNFUSED = _PRELUDE + '''

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@triton.jit
def shift_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        a, b, y = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
        relu_kernel[grid](x, a, n, BLOCK=1024)
        scale_kernel[grid](a, b, n, BLOCK=1024)
        shift_kernel[grid](b, y, n, BLOCK=1024)
        return y
'''

FUSED = _PRELUDE + '''

@triton.autotune(
    configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 2048}, num_warps=8),
             triton.Config({"BLOCK": 4096}, num_warps=8)],
    key=["n"],
)
@triton.jit
def relu2p1_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2.0 + 1.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu2p1_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y
'''

#: a Triton-format answer that launches a kernel but lets torch compute the op: the harness must refuse it
TORCH_COMPUTES = _PRELUDE + '''

@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return torch.relu(y) * 2.0 + 1.0
'''

DIAGNOSIS = json.dumps({"error_class": "compile_error", "root_cause": "tl.lod is not a triton.language function",
                        "fix": "load with tl.load"})

SCRIPT = {
    "r00.generate.1": [fenced(SEED)],
    "r01.diagnose.1": [DIAGNOSIS],
    "r01.repair.1": [fenced(UNFUSED)],
    "r02.plan.1": [planner_answer("kernel_fusion", "fuse relu, scale and shift into one autotuned Triton kernel")],
    "r02.optimize.1": [fenced(FUSED)],
    "r02.review.1": [review(True)],
}

MATMUL_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    # integers: every product and partial sum is exact in fp32, so an IEEE kernel matches the reference bit for
    # bit whatever its summation order, while TF32 (11 significant bits) rounds most of a
    a = torch.randint(-32768, 32769, (512, 256)).float()
    b = torch.randint(-1, 2, (256, 512)).float()
    return [a, b]


def get_init_inputs():
    return []
'''

MATMUL = _PRELUDE + '''

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * sam + (k0 + offs_k)[None, :] * sak,
                    mask=(offs_m[:, None] < M) & ((k0 + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + offs_k)[:, None] * sbk + offs_n[None, :] * sbn,
                    mask=((k0 + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b{PRECISION})
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), BM=64, BN=64, BK=32)
        return c
'''


def _keep(name: str, data: object) -> None:
    out = os.environ.get("KS_GPU_OUT")
    if out:
        (Path(out) / name).write_text(json.dumps(data, indent=1))


@pytest.mark.gpu
def test_triton_candidates_through_seed_repair_and_optimization(tmp_path: Path) -> None:
    task = tmp_path / "relu_scale_shift.py"
    task.write_text(TASK)
    evaluator = HarnessEvaluator(HarnessSettings())
    evaluator.check()
    options = LoopOptions(rounds=2, verify_candidates=1, candidate_format="triton")
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(SCRIPT) as server:
        llm = LLMClient.from_settings(LLMSettings(base_url=server.base_url, api_key="sk-test", model="test-model",
                                                  backoff_s=0.01))
        result = Loop(run, llm, evaluator, StandInRetriever(), options).execute()
        assert sorted(server.steps()) == sorted(SCRIPT)

    evals = {e["step"]: eval_view(e["data"]["result"]) for e in run.log.of_type("eval")}
    figures = {k: {f: v[f] for f in ("status", "speedup", "candidate_ms", "baseline_ms", "message")}
               for k, v in evals.items()}
    print(json.dumps(figures, indent=1))
    _keep("loop_triton_gpu_evals.json", figures)
    out = os.environ.get("KS_GPU_OUT")
    if out and (run.path / "report.md").exists():
        shutil.copy(run.path / "report.md", Path(out) / "loop_triton_gpu_report.md")
    assert evals["r00.eval"]["status"] == "compile_error", evals["r00.eval"]
    assert evals["r01.eval"]["correct"], evals["r01.eval"]["message"]
    assert evals["r02.eval"]["correct"], evals["r02.eval"]["message"]
    assert evals["r02.eval"]["speedup"] > evals["r01.eval"]["speedup"]  # one pass over memory instead of three
    assert result.best is not None and result.verified
    assert result.best["candidate"] == "candidates/r02.optimize.py"
    assert result.best["speedup"] == evals["r02.eval"]["speedup"]
    assert result.best["verified_speedup"] == evals["verify.r02.optimize"]["speedup"]
    assert f"{evals['r02.eval']['speedup']:.3f}" in (run.path / "report.md").read_text()


@pytest.mark.gpu
def test_harness_judges_triton_candidates_by_the_same_rules(tmp_path: Path) -> None:
    evaluator = HarnessEvaluator(HarnessSettings())
    evaluator.check()
    task, mm_task = tmp_path / "relu_scale_shift.py", tmp_path / "matmul.py"
    task.write_text(TASK)
    mm_task.write_text(MATMUL_TASK)
    cases = {"torch_computes": (task, TORCH_COMPUTES),
             "tl_dot_tf32": (mm_task, MATMUL.replace("{PRECISION}", "")),
             "tl_dot_ieee": (mm_task, MATMUL.replace("{PRECISION}", ', input_precision="ieee"'))}
    results = {}
    for name, (task_file, source) in cases.items():
        candidate = tmp_path / f"{name}.py"
        candidate.write_text(source)
        raw = evaluator.evaluate(task_file, candidate)
        results[name] = {**eval_view(raw), "cheat_check": (raw.get("details") or {}).get("cheat_check")}
    print(json.dumps({k: {f: v[f] for f in ("status", "speedup", "message", "cheat_check")}
                      for k, v in results.items()}, indent=1))
    _keep("harness_triton_gpu_cases.json", results)
    assert not results["torch_computes"]["correct"]
    assert "torch" in (results["torch_computes"]["message"] + str(results["torch_computes"]["cheat_check"]))
    assert not results["tl_dot_tf32"]["correct"], "TF32 tl.dot must fail an fp32 task under the strict protocol"
    assert results["tl_dot_ieee"]["correct"], results["tl_dot_ieee"]["message"]
