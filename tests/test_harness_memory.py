"""Memory of an evaluation (issue 28 item 3), on the CPU: whose an out-of-memory error is, the float64 check in
batch chunks giving the verdict of the whole batch, and a harness-stage OOM reaching the loop as a harness
failure. tests/test_harness_gpu_memory.py evaluates the largest level-1 tasks on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelskill.pipeline.harness import EvalConfig, EvalJob, EvalResult, LocalEvaluator
from kernelskill.pipeline.harness.compare import max_normalized_error
from kernelskill.pipeline.harness.evaluation import fp64_errors
from kernelskill.pipeline.harness.memory import MemoryLedger, budget_bytes, is_oom, oom_is_candidates
from kernelskill.pipeline.loop import eval_view

CASES = Path(__file__).parent / "harness_cases"
GB = 2**30


def test_an_oom_is_the_candidates_only_when_it_had_twice_the_reference_forwards_room():
    # 80 GB card, the reference's forward needs 13 GB
    assert oom_is_candidates(held_bytes=30 * GB, total_bytes=80 * GB, reference_forward_bytes=13 * GB)
    # the harness holds 70 GB: the candidate had 10 GB, less than the reference needed: the harness's
    assert not oom_is_candidates(held_bytes=70 * GB, total_bytes=80 * GB, reference_forward_bytes=13 * GB)
    assert budget_bytes(13 * GB) == 39 * GB and budget_bytes(1) == 1 + GB  # 3x, with a floor for small tasks
    assert is_oom(torch.OutOfMemoryError("CUDA out of memory")) and is_oom(MemoryError())
    assert not is_oom(RuntimeError("shape mismatch"))


def test_the_ledger_reports_nothing_on_the_cpu_but_the_reference():
    ledger = MemoryLedger(None)
    ledger.enter("first_forward")
    ledger.enter("timing")
    assert ledger.report() == {"reference": 0.0, "budget": 1024.0}


class _RowSoftmax(torch.nn.Module):
    def forward(self, x, scale):
        return torch.softmax(x * scale, dim=1), x.sum(dim=1)


@pytest.mark.parametrize("noise", [0.0, 1e-6, 1e-3])
def test_chunked_float64_check_gives_the_whole_batchs_errors(noise):
    torch.manual_seed(0)
    model = _RowSoftmax()
    xs = [torch.randn(37, 300), 1.5]
    ref = model(*xs)
    cand = tuple(o + noise * torch.randn_like(o) for o in ref)
    cfg = EvalConfig()
    whole = fp64_errors(model, xs, ref, cand, max_bytes=None, config=cfg)
    chunked = fp64_errors(model, xs, ref, cand, max_bytes=20_000, config=cfg)
    assert whole[2] == "whole batch" and chunked[2].endswith("batch chunks") and chunked[2] != "1 batch chunks"
    assert chunked[:2] == whole[:2]  # maxima over chunks are the maxima over the batch: the same verdict
    out64 = model(xs[0].double(), 1.5)
    assert whole[1] == pytest.approx(max_normalized_error(out64, cand))


def test_a_forward_whose_rows_depend_on_each_other_is_not_cut():
    model = torch.nn.BatchNorm1d(16).train()
    x = torch.randn(64, 16)
    with torch.no_grad():
        ref = model(x)
    with pytest.raises(ValueError, match="rows depend on other rows"):
        fp64_errors(model, [x], ref, ref, max_bytes=4000, config=EvalConfig())


# --- end to end: real workers on the CPU ------------------------------------------------------------------
@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("cache"))
    cfg = EvalConfig(cache_dir=cache, timing_trials=5, warmup=1, correctness_trials=2)
    jobs = [EvalJob(str(CASES / "tasks" / "oom_inputs.py"), str(CASES / "cpu" / "good_add.py"), cfg, tag="harness"),
            EvalJob(str(CASES / "tasks" / "add_small.py"), str(CASES / "cpu" / "oom_forward.py"), cfg, tag="candidate")]
    return {j.tag: r for j, r in zip(jobs, LocalEvaluator(gpus=[], slots_per_gpu=2).submit(jobs), strict=True)}


def test_an_oom_in_the_harnesss_own_work_is_a_harness_failure(results):
    r: EvalResult = results["harness"]
    assert r.status == "oom" and r.harness_failure, r.message
    assert r.details["stage"] == "pointer_probe" and "harness's own work" in r.message
    view = eval_view(r.to_dict())
    assert view["harness_failure"] and not view["correct"]  # the loop does not send it to repair


def test_an_oom_in_the_candidates_forward_with_room_to_spare_is_the_candidates(results):
    r: EvalResult = results["candidate"]
    assert r.status == "oom" and not r.harness_failure, r.message
    assert not eval_view(r.to_dict())["harness_failure"]


def test_a_traced_holder_names_the_variable_or_container_that_keeps_a_tensor():
    import sys

    from kernelskill.pipeline.harness.memory import _holder

    kept = object()
    assert _holder(sys._getframe(), kept).startswith("frame test_a_traced_holder_names_the_variable")
    assert "(kept)" in _holder(sys._getframe(), kept)
    assert _holder({"last_out": kept}, kept) == "dict[last_out]"
    assert _holder([kept], kept) == "list"


_STAGE_COUNTER = """
import json, sys
from kernelskill.pipeline.harness.config import eval_config
from kernelskill.pipeline.harness.evaluation import Evaluation
from kernelskill.pipeline.harness.failures import Stage
from kernelskill.pipeline.harness.memory import MemoryLedger, live_tensors

alive = {}
enter = MemoryLedger.enter

def counting(self, stage):  # the CPU has no allocator statistics: count the live 8 MB tensors instead
    alive.setdefault(stage, len(live_tensors(8 * 2**20, device_type="cpu")))
    return enter(self, stage)

MemoryLedger.enter = counting
cfg = eval_config({}, protocol="kernelbench", time=False)
req = {"mode": "evaluate", "task": sys.argv[1], "candidate": sys.argv[2], "kind": "python",
       "config": cfg.to_dict(), "device_type": "cpu"}
result = Evaluation(req, Stage(None)).run()
print(json.dumps({"status": result["status"], "message": result["message"], "alive": alive,
                  "trials": cfg.correctness_trials}))
"""


def test_no_stage_begins_with_tensors_an_earlier_stage_left_alive(tmp_path):
    """Each stage begins with only what it needs: nothing at a correctness trial (the previous trial's tensors
    go first), the last trial's inputs and both outputs at the determinism re-runs, the inputs alone after the
    float64 check. Loop variables once kept a copied input and a re-run's output alive to the end (2 of the 8
    reference-sized tensors at the 6 GB softmax's peak on an H100). The evaluation runs in a child process, as
    in the harness (importing a candidate installs the worker's socket filter on its process)."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "task.py").write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n\n"
        "def get_inputs():\n    return [torch.rand(16, 131072)]\n\ndef get_init_inputs():\n    return []\n")
    (tmp_path / "cand.py").write_text(
        "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n")
    done = subprocess.run([sys.executable, "-c", _STAGE_COUNTER, str(tmp_path / "task.py"), str(tmp_path / "cand.py")],
                          capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    alive = out["alive"]
    assert out["status"] == "ok", out["message"]
    assert all(alive[f"correctness_trial_{t}"] == 0 for t in range(out["trials"])), alive
    assert alive["determinism"] == 3 and alive["precision_fp64"] == 3, alive  # inputs, reference and first output
    assert alive["alt_shapes"] == 1 and alive["tamper_check"] == 1, alive  # the inputs the timing reuses
