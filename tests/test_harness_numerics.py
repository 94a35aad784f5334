"""One numeric path (issue 28 item 5, issue 32), on the CPU: the decision logic that says under which backend
settings each function is verified and timed, and end to end through real worker processes.

A candidate is timed under exactly the settings it was verified under (IEEE fp32: TF32 off); the eager and
torch.compile baselines under PyTorch's shipped defaults (cuDNN TF32 on). What a candidate switches is confined
to its own calls, and a switch is no longer a cheat by itself: the float64 check judges the result
(tests/test_harness_gpu_numerics.py shows both on a cuDNN convolution).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelskill.pipeline.harness import EvalConfig, EvalJob, LocalEvaluator
from kernelskill.pipeline.harness.numerics import (
    BackendSettings,
    applied,
    confined,
    ieee_fp32,
    timing_settings,
)

CASES = Path(__file__).parent / "harness_cases"
ADD = str(CASES / "tasks" / "add_small.py")


@pytest.fixture
def restore_settings():
    before = BackendSettings.current()
    yield before
    before.apply()


def test_pytorch_defaults_and_the_verified_settings_differ_in_cudnn_tf32(restore_settings):
    defaults = restore_settings
    verified = ieee_fp32()
    assert defaults.describe()["cudnn_conv_tf32"] is True  # as PyTorch ships
    assert verified.describe()["cudnn_conv_tf32"] is False and verified.describe()["matmul_tf32"] is False
    assert verified.differences(defaults)


def test_the_candidate_is_timed_under_its_verified_settings_the_baselines_under_the_defaults(restore_settings):
    defaults = restore_settings
    verified = ieee_fp32()
    assert timing_settings("candidate", verified=verified, defaults=defaults) == verified
    assert timing_settings("reference", verified=verified, defaults=defaults) == defaults
    assert timing_settings("compile", verified=verified, defaults=defaults) == defaults
    assert timing_settings("reference_ieee", verified=verified, defaults=defaults) == verified
    with pytest.raises(ValueError, match="unknown role"):
        timing_settings("parent", verified=verified, defaults=defaults)


def test_settings_round_trip_through_apply(restore_settings):
    defaults = restore_settings
    verified = ieee_fp32()
    defaults.apply()
    assert BackendSettings.current() == defaults
    verified.apply()
    assert BackendSettings.current() == verified
    with applied(defaults):
        assert BackendSettings.current() == defaults
    assert BackendSettings.current() == verified


def test_a_switch_inside_the_candidate_is_confined_to_its_call_and_recorded(restore_settings):
    verified = ieee_fp32()
    seen: list[BackendSettings] = []

    def candidate(x):
        seen.append(BackendSettings.current())
        torch.backends.cudnn.allow_tf32 = True  # switched on and never put back
        torch.backends.cudnn.benchmark = True
        return x + 1

    switched: dict = {}
    wrapped = confined(candidate, verified, switched)
    restore_settings.apply()  # whatever the process runs under, the candidate gets its verified settings
    assert wrapped(torch.zeros(2)).tolist() == [1.0, 1.0]
    assert seen[0] == verified
    assert BackendSettings.current() == verified  # the switch did not outlive the call
    assert "cudnn.benchmark" in switched and "cudnn.conv.tf32" in switched
    wrapped(torch.zeros(2))
    assert seen[1] == verified  # the second call runs on the same path as the first


def test_a_scoped_switch_that_puts_its_flags_back_is_not_recorded(restore_settings):
    verified = ieee_fp32()
    switched: dict = {}

    def candidate(x):
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
            return x * 2

    confined(candidate, verified, switched)(torch.ones(3))
    assert switched == {} and BackendSettings.current() == verified


# --- end to end: real workers on the CPU ------------------------------------------------------------------
CPU_CASES = {"flag_probe": ADD, "global_tf32": ADD, "good_add": ADD}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("cache"))
    jobs = [EvalJob(task, str(CASES / "cpu" / f"{name}.py"),
                    EvalConfig(cache_dir=cache, timing_trials=5, warmup=1, correctness_trials=2), tag=name)
            for name, task in CPU_CASES.items()]
    return {j.tag: r for j, r in zip(jobs, LocalEvaluator(gpus=[], slots_per_gpu=2).submit(jobs), strict=True)}


def test_a_candidate_is_timed_on_the_path_it_was_verified_on(results):
    """flag_probe raises when a call runs under other settings than its first: it is verified and timed."""
    r = results["flag_probe"]
    assert r.status == "ok", r.message
    settings = r.details["timing"]["backend_settings"]
    assert settings["candidate"] == r.details["numeric_path"]["verified"]
    assert settings["candidate"]["cudnn_conv_tf32"] is False
    assert settings["reference"]["cudnn_conv_tf32"] is True  # the eager baseline: PyTorch's defaults


def test_switching_tf32_on_is_not_a_cheat_by_itself(results):
    r = results["global_tf32"]
    assert r.status == "ok", r.message
    assert r.cheat_check is None
    assert any("changed backend settings when imported" in w for w in r.details["warnings"])
    assert r.details["timing"]["backend_settings"]["candidate"]["cudnn_conv_tf32"] is False


def test_every_result_states_its_numeric_path_and_speedup_interval(results):
    r = results["good_add"]
    assert r.status == "ok", r.message
    assert set(r.details["numeric_path"]) >= {"verified", "candidate_timed", "baselines_timed"}
    lo, hi = r.speedup_ci
    assert lo <= r.speedup <= hi
