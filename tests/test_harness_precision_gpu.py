"""GPU test of ``--precision bf16``: a load_inline kernel on ``__nv_bfloat16`` data evaluated against a task written
in fp32 (tests/harness_cases/tasks/scale_bias_relu.py) that the harness casts to bf16. The kernel is correct and
timed in bf16, against the bf16 tolerance, with the bf16 tensor-core peak in its speed-of-light floor; a kernel that
writes a fp32 output fails on the dtype, one that leaves its bf16 output unwritten reads the poisoned memory as NaN,
and the same bf16 kernel in a fp32 run is refused by its own dtype check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelskill.pipeline.harness import EvalConfig, EvalJob, LocalEvaluator

pytestmark = pytest.mark.gpu

CASES = Path(__file__).parent / "harness_cases"
TASK = str(CASES / "tasks" / "scale_bias_relu.py")

#: tag -> (precision, candidate)
JOBS = {
    "bf16_kernel": ("bf16", "good_bf16_inline"),
    "bf16_fp32_output": ("bf16", "bad_bf16_fp32_output"),
    "fp32_run_of_bf16_kernel": ("fp32", "good_bf16_inline"),
    "bf16_uninitialised": ("bf16", "bad_bf16_uninitialised"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    cache = os.environ.get("KERNELSKILL_TEST_CACHE") or str(tmp_path_factory.mktemp("cache"))
    jobs = [EvalJob(TASK, str(CASES / "gpu" / f"{cand}.py"),
                    EvalConfig(cache_dir=cache, timing_trials=30, precision=prec), tag=tag)
            for tag, (prec, cand) in JOBS.items()]
    out = {r.details["tag"]: r for r in LocalEvaluator().submit(jobs)}
    dump = os.environ.get("KERNELSKILL_TEST_DUMP")
    if dump:  # the results, for the record (the device tool brings $OUT back)
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / "precision_gpu.json").write_text(json.dumps({k: v.to_dict() for k, v in out.items()},
                                                                  indent=1, default=str))
    return out


def test_bf16_kernel_is_correct_and_timed_in_bf16(results):
    res = results["bf16_kernel"]
    assert res.status == "ok", f"{res.message}\n{res.build_log[-2000:]}"
    assert res.precision == "bf16" and res.details["task_dtype"] == "bf16"
    assert res.details["tolerance"] == {"dtype": "bfloat16", "atol": 1e-2, "rtol": 1e-2}
    assert res.details["fp64_check"].startswith("skipped: the task runs in bf16")
    assert res.speedup and res.speedup > 0 and res.candidate_ms > 0
    sol = res.details["speed_of_light"]
    assert sol["dtype"] == "bfloat16" and sol["floor_ms"] > 0
    assert res.details["gpu"]["bf16_tflops"] > 0  # the device's facts carry the bf16 rate


def test_fp32_output_in_a_bf16_run_fails_on_its_dtype(results):
    res = results["bf16_fp32_output"]
    assert res.status == "mismatch" and res.details["check"] == "dtype", res.message
    assert "dtype float32 != reference bfloat16" in res.message and "runs in bf16" in res.message


def test_fp32_run_does_not_cast(results):
    res = results["fp32_run_of_bf16_kernel"]
    assert res.status == "runtime_error" and "bf16 tensors expected" in res.message, res.message
    assert res.precision == "fp32"


def test_an_unwritten_bf16_output_fails(results):
    res = results["bf16_uninitialised"]
    assert res.status == "mismatch" and "non-finite" in res.message, res.message
