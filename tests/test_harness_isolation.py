"""CPU end-to-end tests of the harness: real worker processes, real process groups, pure-Python
candidates (tests/harness_cases/cpu) evaluated on the CPU device. Each case must get its class; a
crash, a hang or a memory hog ends its own worker only."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.pipeline.harness import EvalConfig, EvalJob, LocalEvaluator, build, evaluate

CASES = Path(__file__).parent / "harness_cases"
ADD = str(CASES / "tasks" / "add_small.py")
SOFTMAX = CASES / "tasks" / "softmax_wide.py"

#: case -> (task, config overrides, status, cheat check)
EXPECTED = {
    "good_add": (ADD, {}, "ok", None),
    "good_linear": (str(CASES / "tasks" / "scale_linear.py"), {"library_policy": "allow_gemm_conv"}, "ok", None),
    "mismatch": (ADD, {}, "mismatch", None),
    "wrong_shape": (ADD, {}, "wrong_shape", None),
    "nan_output": (ADD, {}, "mismatch", None),
    "torch_fallback": (ADD, {}, "cheat", "torch_compute"),
    "thread": (ADD, {}, "cheat", "background_thread"),
    "subclass": (ADD, {}, "cheat", "tensor_subclass"),
    "alias": (ADD, {}, "cheat", "output_aliases_input"),
    "timer_patch": (ADD, {}, "cheat", "timer_patched"),
    "pointer_cache": (ADD, {}, "cheat", "pointer_cache"),
    "crash_segfault": (ADD, {}, "runtime_error", None),
    "hang": (ADD, {"run_timeout_s": 8}, "timeout", None),
    "host_oom": (ADD, {"max_rss_gb": 1.5}, "oom", None),
    "import_error": (ADD, {}, "runtime_error", None),
    "env_probe": (ADD, {"time": False}, "runtime_error", None),
    "zeros_softmax": (str(SOFTMAX), {"time": False, "correctness_trials": 1, "alt_shapes": False}, "mismatch", None),
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("build-cache"))


@pytest.fixture(scope="module")
def results(cache):
    mp = pytest.MonkeyPatch()  # secrets in the parent's environment must not reach candidates
    mp.setenv("OPENAI_API_KEY", "sk-test-123")
    mp.setenv("KERNELSKILL_LLM_API_KEY", "sk-test-456")
    mp.setenv("HF_TOKEN", "hf-test")
    jobs = []
    for name, (task, over, _status, _check) in EXPECTED.items():
        cfg = EvalConfig(**({"cache_dir": cache, "timing_trials": 5, "warmup": 1, "correctness_trials": 3} | over))
        jobs.append(EvalJob(task, str(CASES / "cpu" / f"{name}.py"), cfg, tag=name))
    start = time.monotonic()
    try:
        out = LocalEvaluator(gpus=[], slots_per_gpu=2).submit(jobs)
    finally:
        mp.undo()
    return {r.details["tag"]: r for r in out} | {"_wall": time.monotonic() - start}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_cpu_case_gets_its_class(results, name):
    _task, _over, status, check = EXPECTED[name]
    res = results[name]
    assert res.status == status, f"{name}: {res.status}: {res.message}"
    if check:
        assert res.details.get("cheat_check") == check, res.message
    json.loads(res.to_json())  # every result is JSON


def test_good_case_is_timed_and_compared(results):
    res = results["good_add"]
    assert res.correct and res.candidate_ms > 0 and res.baseline_ms > 0 and res.speedup > 0
    assert res.details["timing"]["trials"] == 5
    assert res.details["alt_shapes"] == "batch_size 64->47, dim 256->191"  # every size varied, odd
    assert res.details["bitwise_deterministic"] is True


def test_crash_and_hang_are_contained(results):
    seg = results["crash_segfault"]
    assert "SIGSEGV" in seg.message and seg.details["stage"] == "first_forward"
    hang = results["hang"]
    assert hang.details["worker_seconds"] < 20 and "killed" in hang.message
    assert "host memory" in results["host_oom"].message


def test_mismatch_names_errors_and_index(results):
    d = results["mismatch"].details
    assert d["max_abs_err"] > 0 and d["max_rel_err"] == pytest.approx(0.01, rel=1e-3)
    assert d["first_bad_index"] == [0, 0]


def test_secrets_do_not_reach_the_candidate(results):
    res = results["env_probe"]
    assert "clean env" in res.message, res.message
    assert "ks-worker-" in res.message  # HOME and cwd are the worker's temporary folder


def test_zero_output_fails_on_tiny_reference(results):
    assert results["zeros_softmax"].details["check"] == "relative_l2"


def test_unparsable_candidate_is_a_compile_error(tmp_path):
    res = evaluate(ADD, CASES / "cpu" / "syntax_error.txt", EvalConfig(cache_dir=str(tmp_path)))
    assert res.status == "compile_error" and "syntax_error.txt:4" in res.message


def test_build_cache_hit(tmp_path):
    cfg = EvalConfig(cache_dir=str(tmp_path))
    plain = build(CASES / "cpu" / "good_add.py", cfg)
    assert plain.ok and "nothing to build" in plain.message
    lazy = build(CASES / "gpu" / "good_add_fastpath.py", cfg)
    assert lazy.ok and lazy.deferred  # by default fast-path kernels compile in the GPU worker (~0.4 s)
    # with prebuild_fastpath, nvcc -cubin runs in a build worker with the GPU hidden
    cfg = EvalConfig(cache_dir=str(tmp_path / "pre"), prebuild_fastpath=True)
    first = build(CASES / "gpu" / "good_add_fastpath.py", cfg)
    second = build(CASES / "gpu" / "good_add_fastpath.py", cfg)
    assert first.ok and not first.cached and not first.deferred, first.message
    assert second.cached and second.key == first.key and second.seconds == 0.0
    # the cubins are the entry's own (CACHE/<key>/cubin), copied there by the parent from the build worker
    assert list((tmp_path / "pre" / first.key / "cubin").glob("*.cubin"))
    assert (tmp_path / first.key / "build.json").is_file()


def test_cli_eval_json_and_exit_codes(tmp_path):
    from kernelskill.cli import main

    runner = CliRunner()
    home = tmp_path / "home"
    res = runner.invoke(main, ["--home", str(home), "eval", ADD, str(CASES / "cpu" / "good_add.py"),
                               "--json", "--trials", "3"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)  # progress lines go to stderr; stdout is the JSON document alone
    assert data["result"]["status"] == "ok" and data["result"]["speedup"] > 0
    res = runner.invoke(main, ["--home", str(home), "eval", str(CASES / "cpu" / "good_add.py"),
                               str(CASES / "cpu" / "good_add.py")])
    assert res.exit_code == 2 and "not a KernelBench task" in res.output and "it is a candidate" in res.output


def test_a_worker_without_the_gpu_its_parent_sees_fails_loudly_never_on_the_cpu(tmp_path, monkeypatch):
    """Where the parent sees a CUDA device and the worker does not (a sandbox that hides the driver), the
    evaluation is a harness failure naming why: it never falls back to timing the candidate on the CPU."""
    monkeypatch.setenv("KERNELSKILL_HARNESS_DEVICE", "cuda")  # what a GPU machine's parent would say
    res = evaluate(ADD, CASES / "cpu" / "good_add.py", EvalConfig(cache_dir=str(tmp_path)))
    assert not res.correct and res.harness_failure, res.message
    assert "parent process sees a CUDA device but this worker does not" in res.message
    assert res.candidate_ms is None and "gpu" not in res.details
