"""GPU tests: every known-good and known-bad case of tests/harness_cases/gpu gets its class.

All cases go through one LocalEvaluator submit (parallel CPU builds, then the GPU queue), the way
the optimize loop uses the harness. Run on the H200 through the device tool.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelskill.pipeline.harness import EvalConfig, EvalJob, LocalEvaluator

pytestmark = pytest.mark.gpu

CASES = Path(__file__).parent / "harness_cases"
T = CASES / "tasks"

#: case -> (task, config overrides, accepted statuses, cheat check or None)
EXPECTED: dict[str, tuple[str, dict, set[str], str | None]] = {
    "good_add_fastpath": ("add", {}, {"ok"}, None),
    "good_add_inline": ("add", {}, {"ok"}, None),
    "good_add_triton": ("add", {}, {"ok"}, None),
    "good_matmul_fastpath": ("matmul", {}, {"ok"}, None),
    "good_softmax_fastpath": ("softmax_wide", {}, {"ok"}, None),
    "bad_zeros_softmax": ("softmax_wide", {}, {"mismatch"}, None),
    "bad_uninitialised": ("add", {}, {"mismatch"}, None),
    "bad_illegal_address": ("add", {}, {"illegal_memory_access"}, None),
    "bad_compile_error": ("add", {}, {"compile_error"}, None),
    "bad_oom": ("add", {}, {"oom"}, None),
    "bad_wrong_shape": ("add", {}, {"wrong_shape"}, None),
    "bad_nondeterministic": ("add", {}, {"nondeterministic"}, None),
    "bad_side_stream": ("add", {}, {"cheat"}, "side_stream"),
    "bad_pointer_cache": ("add", {}, {"cheat"}, "pointer_cache"),
    "bad_torch_fallback": ("add", {}, {"cheat"}, "torch_compute"),
    "bad_cublas_matmul": ("matmul", {}, {"cheat"}, "library_call"),
    "bad_precision_matmul": ("matmul", {"atol": 1e-2, "rtol": 1e-2}, {"cheat"}, "precision_downcast"),
    "bad_timer_patch": ("add", {}, {"cheat"}, "timer_patched"),
    "bad_thread": ("add", {}, {"cheat"}, "background_thread"),
    "bad_lazy_subclass": ("add", {}, {"cheat"}, "tensor_subclass"),
    "bad_hardcoded_shape": ("add", {}, {"wrong_shape", "mismatch", "illegal_memory_access"}, None),
    "bad_alias_input": ("add", {}, {"cheat"}, "output_aliases_input"),
    "bad_inline_compile_error": ("add", {}, {"compile_error"}, None),
    "bad_infinite_loop": ("add", {"run_timeout_s": 25}, {"timeout"}, None),
}
#: the same GEMM is fine when the policy allows cuBLAS for the GEMM part
ALLOWED = {"bad_cublas_matmul@allow": ("bad_cublas_matmul", "matmul", {"library_policy": "allow_gemm_conv"},
                                       {"ok"}, None)}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cache = os.environ.get("KERNELSKILL_TEST_CACHE") or str(tmp_path_factory.mktemp("cache"))
    jobs, keys = [], []
    for name, (task, over, _s, _c) in EXPECTED.items():
        cfg = EvalConfig(cache_dir=cache, timing_trials=30, **over)
        jobs.append(EvalJob(str(T / f"{task}.py"), str(CASES / "gpu" / f"{name}.py"), cfg, tag=name))
        keys.append(name)
    for key, (name, task, over, _s, _c) in ALLOWED.items():
        cfg = EvalConfig(cache_dir=cache, timing_trials=30, **over)
        jobs.append(EvalJob(str(T / f"{task}.py"), str(CASES / "gpu" / f"{name}.py"), cfg, tag=key))
        keys.append(key)
    dump = os.environ.get("KERNELSKILL_TEST_DUMP")

    def record(i, res):  # one JSON line per result as it arrives (a cut-off run still reports)
        if dump:
            with open(dump, "a") as fh:
                fh.write(json.dumps({"case": keys[i], **res.to_dict()}, default=str) + "\n")

    out = dict(zip(keys, LocalEvaluator(on_result=record, slots_per_gpu=3).submit(jobs), strict=True))
    if dump:  # the build-phase records (routes and seconds) of every case
        builds = {k: json.loads((Path(cache) / r.details["build_key"] / "build.json").read_text())
                  for k, r in out.items() if r.details.get("build_key")
                  and (Path(cache) / r.details["build_key"] / "build.json").is_file()}
        Path(dump).with_suffix(".builds.json").write_text(json.dumps(builds, indent=1, default=str))
    return out


@pytest.mark.parametrize("name", [*EXPECTED, *ALLOWED])
def test_case_gets_its_class(results, name):
    if name in EXPECTED:
        _task, _over, statuses, check = EXPECTED[name]
    else:
        _n, _task, _over, statuses, check = ALLOWED[name]
    res = results[name]
    assert res.status in statuses, f"{name}: {res.status}: {res.message}"
    if check:
        assert res.details.get("cheat_check") == check, f"{name}: {res.details.get('cheat_check')}: {res.message}"
    if res.status == "ok":
        assert res.correct and res.candidate_ms and res.baseline_ms and res.speedup
    if res.status == "compile_error":
        assert res.build_log or res.message


def test_build_cache_hit_is_fast(results, tmp_path):
    from kernelskill.pipeline.harness import build

    cfg = EvalConfig(cache_dir=os.environ.get("KERNELSKILL_TEST_CACHE") or str(tmp_path))
    first = build(CASES / "gpu" / "good_add_fastpath.py", cfg)
    again = build(CASES / "gpu" / "good_add_fastpath.py", cfg)
    assert again.cached and again.ok and again.seconds < 0.5 and first.ok


#: candidates that bake an inner size of the task into the kernel (a row length, the GEMM K, in_features):
#: correct on the shipped shapes, so only the second shape set (every module-level size varied) rejects them
HARDCODED = {
    "bad_hardcoded_row_softmax": "softmax_wide",
    "bad_hardcoded_k_matmul": "matmul",
    "bad_hardcoded_in_linear": "scale_linear",
}


@pytest.fixture(scope="module")
def shape_results(tmp_path_factory):
    cache = os.environ.get("KERNELSKILL_TEST_CACHE") or str(tmp_path_factory.mktemp("shape_cache"))
    jobs = [EvalJob(str(T / f"{task}.py"), str(CASES / "gpu" / f"{name}.py"),
                    EvalConfig(cache_dir=cache, timing_trials=20), tag=name) for name, task in HARDCODED.items()]
    return dict(zip(HARDCODED, LocalEvaluator().submit(jobs), strict=True))


@pytest.mark.parametrize("name", list(HARDCODED))
def test_hardcoded_inner_dimension_is_rejected(shape_results, name):
    res = shape_results[name]
    assert res.status in {"mismatch", "wrong_shape", "illegal_memory_access", "runtime_error"}, \
        f"{name}: {res.status}: {res.message}"
    assert "second shape set" in res.message, res.message  # every other check passed it


def test_conv_baseline_is_pytorch_default(tmp_path):
    """The eager baseline of a convolution is timed under PyTorch's defaults (cuDNN TF32 on): it agrees with
    the same model timed here by the same timer within 5 %; the TF32-off time is reported next to it."""
    import torch

    from kernelskill.pipeline.harness import evaluate, timing
    from kernelskill.pipeline.harness.config import eval_config
    from kernelskill.pipeline.harness.loader import load_task

    task = T / "conv_relu.py"
    cfg = eval_config({}, protocol="kernelbench", cache_dir=str(tmp_path), timing_trials=60, timing_budget_s=3.0)
    res = evaluate(task, CASES / "gpu" / "good_conv_relu_fastpath.py", cfg)
    assert res.status == "ok", res.message
    assert res.protocol == "kernelbench"
    assert "reference_ieee" in res.details["timing"]

    mod = load_task(task, "conv_baseline_task")
    dev = torch.device("cuda", 0)
    assert torch.backends.cudnn.allow_tf32  # this process runs with PyTorch's shipped defaults
    with torch.no_grad(), torch.device(dev):
        torch.manual_seed(42)
        model = mod.Model(*mod.get_init_inputs())
        xs = mod.get_inputs()
        here = timing.time_interleaved({"ref": lambda v: model(*v)}, {"ref": [xs]}, trials=60, warmup=3,
                                       flusher=timing.L2Flusher(dev, 256))["ref"].summary()["median_ms"]
    assert abs(res.baseline_ms / here - 1) <= 0.05, (res.baseline_ms, here)
