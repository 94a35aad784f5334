"""GPU tests of one numeric path (issue 28 item 5, issue 32): a candidate is timed under the backend settings
it was verified under, the eager baseline under PyTorch's defaults; a TF32 scope is judged by the fp32 checks
and the float64 check, not by the flags it touches.

    python -m pytest -q -m gpu tests/test_harness_gpu_numerics.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelskill.pipeline.harness import EvalJob, LocalEvaluator
from kernelskill.pipeline.harness.config import eval_config

pytestmark = pytest.mark.gpu

CASES = Path(__file__).parent / "harness_cases"
CONV = CASES / "tasks" / "conv_relu.py"
NAMES = ("conv_default_flags", "conv_tf32_plain", "conv_tf32_compensated", "conv_global_tf32")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    pytest.importorskip("torch").cuda.is_available() or pytest.skip("no CUDA")
    cache = os.environ.get("KERNELSKILL_TEST_CACHE") or str(tmp_path_factory.mktemp("cache"))
    cfg = eval_config({}, protocol="kernelbench", cache_dir=cache, timing_budget_s=1.0)
    jobs = [EvalJob(str(CONV), str(CASES / "gpu" / f"{n}.py"), cfg, tag=n) for n in NAMES]
    return {j.tag: r for j, r in zip(jobs, LocalEvaluator().submit(jobs), strict=True)}


def test_library_conv_under_default_flags_is_timed_on_the_path_it_was_verified_on(results):
    r = results["conv_default_flags"]
    assert r.status == "ok", r.message
    path = r.details["numeric_path"]
    assert path["verified"]["cudnn_conv_tf32"] is False
    assert path["candidate_timed"] == path["verified"]
    settings = r.details["timing"]["backend_settings"]
    assert settings["candidate"]["cudnn_conv_tf32"] is False  # verified in IEEE fp32, timed in IEEE fp32
    assert settings["reference"]["cudnn_conv_tf32"] is True  # the eager baseline keeps PyTorch's default
    assert settings["reference_ieee"]["cudnn_conv_tf32"] is False
    lo, hi = r.speedup_ci
    assert lo <= r.speedup <= hi


def test_plain_tf32_convolution_still_fails(results):
    r = results["conv_tf32_plain"]
    assert r.status in ("mismatch", "cheat"), (r.status, r.message)
    if r.status == "cheat":
        assert r.cheat_check == "precision_downcast"


def test_tf32_scope_with_error_compensation_passes_the_float64_check(results):
    r = results["conv_tf32_compensated"]
    assert r.status == "ok", r.message
    err = r.details["fp64_error"]
    assert err["candidate"] <= max(32 * err["reference"], 2e-5)


def test_a_global_switch_is_confined_to_the_candidate_and_not_a_cheat(results):
    r = results["conv_global_tf32"]
    assert r.status == "ok", r.message
    assert any("changed backend settings when imported" in w for w in r.details.get("warnings", []))
    assert r.details["timing"]["backend_settings"]["candidate"]["cudnn_conv_tf32"] is False
