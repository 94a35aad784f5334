"""The torch.compile baseline measured once per task, GPU and software (pipeline/harness/compile_baseline.py):
its key, its store, the figures derived for a candidate, the seeding of the store from run events, and the
measurement itself through a real worker (the CPU path here; the GPU path is marked ``gpu``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from kernelskill.pipeline.harness import EvalConfig, EvalJob, EvalResult, LocalEvaluator
from kernelskill.pipeline.harness import compile_baseline as cb
from kernelskill.pipeline.harness.api import (
    compile_baseline_record,
    compile_baseline_store,
    seed_compile_baselines,
)
from kernelskill.pipeline.runs import RunStore, gpu_side

CASES = Path(__file__).parent / "harness_cases"
ADD_SMALL = CASES / "tasks" / "add_small.py"
ENV = cb.Environment(gpu="NVIDIA H100 80GB HBM3", torch="2.9.0+cu128", triton="3.5.0")


def record(key: str, eager: float = 1.0, compile_: float = 0.5) -> dict[str, Any]:
    return {"schema": cb.SCHEMA, "key": key, "eager_ms": eager, "compile_ms": compile_, "eager_iqr_ms": 0.01,
            "compile_iqr_ms": 0.02, "trials": 40, "gpu": ENV.gpu, "torch": ENV.torch, "triton": ENV.triton}


# --- the key -------------------------------------------------------------------------------------
def test_key_changes_with_the_task_bytes_gpu_torch_and_triton():
    cfg = EvalConfig(baseline="compile")
    base = cb.baseline_key(b"task", cfg, ENV)
    assert base == cb.baseline_key(b"task", EvalConfig(baseline="compile"), ENV)
    others = [cb.baseline_key(b"task ", cfg, ENV),
              cb.baseline_key(b"task", cfg, dataclasses.replace(ENV, gpu="NVIDIA H200")),
              cb.baseline_key(b"task", cfg, dataclasses.replace(ENV, torch="2.10.0")),
              cb.baseline_key(b"task", cfg, dataclasses.replace(ENV, triton="3.6.0"))]
    assert len({base, *others}) == 5


def test_key_follows_what_the_reference_runs_and_how_it_is_timed_only():
    cfg = EvalConfig(baseline="compile")
    base = cb.baseline_key(b"task", cfg, ENV)
    for field, value in (("precision", "bf16"), ("timing_trials", 50), ("warmup", 5), ("l2_flush_mb", 0)):
        assert cb.baseline_key(b"task", dataclasses.replace(cfg, **{field: value}), ENV) != base, field
    # what judges the candidate, limits and paths, and the values (not the shapes) of weights and timed
    # inputs: the same baseline, so a verification on another seed shares its run's
    same = EvalConfig.from_protocol("kernelbench", baseline="compile", atol=1e-2, run_timeout_s=30,
                                    cache_dir="/elsewhere", alt_shapes=False, check_fp64=False, device=3,
                                    seed=7, correctness_trials=2)
    assert cb.baseline_key(b"task", same, ENV) == base


def test_legacy_key_is_the_first_schemas_which_covered_the_seed():
    cfg = EvalConfig(baseline="compile")
    legacy = cb.legacy_key(b"task", cfg, ENV)
    assert legacy != cb.baseline_key(b"task", cfg, ENV)
    assert cb.legacy_key(b"task", dataclasses.replace(cfg, seed=7), ENV) != legacy
    # the /1 formula, written out: a record of a run measured before /2 must still be found
    digest = hashlib.sha256()
    fields = {name: getattr(cfg, name) for name in ("precision", "seed", "correctness_trials", "timing_trials",
                                                     "min_timing_trials", "timing_budget_s", "timing_ci",
                                                     "warmup", "l2_flush_mb")}
    for part in ("kernelskill-compile-baseline/1", hashlib.sha256(b"task").hexdigest(),
                 json.dumps(fields, sort_keys=True), json.dumps(dataclasses.asdict(ENV), sort_keys=True)):
        digest.update(part.encode() + b"\0")
    assert legacy == digest.hexdigest()


def test_environment_names_this_machine():
    import torch

    env = cb.environment()
    assert env.torch == torch.__version__ and env.triton
    assert env.gpu == (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")


def test_applies_to_the_compile_baseline_on_cuda_once_only():
    assert cb.applies(EvalConfig(baseline="compile"), "cuda")
    assert not cb.applies(EvalConfig(baseline="compile"), "cpu")  # the CPU keeps the inline compile
    assert not cb.applies(EvalConfig(baseline="compile", compile_baseline="inline"), "cuda")
    assert not cb.applies(EvalConfig(baseline="eager"), "cuda")
    assert not cb.applies(EvalConfig(baseline="compile", time=False), "cuda")
    with pytest.raises(ValueError, match="compile_baseline"):
        EvalConfig(compile_baseline="sometimes")


def test_baseline_worker_runs_the_tasks_own_model_with_the_candidate_checks_off():
    source = cb.baseline_source(ADD_SMALL.read_text())
    assert source.startswith(ADD_SMALL.read_text().rstrip()) and source.endswith("ModelNew = Model\n")
    bcfg = cb.baseline_config(EvalConfig.from_protocol("strict", baseline="compile", seed=9))
    assert (bcfg.baseline, bcfg.compile_baseline, bcfg.torch_ops, bcfg.library_policy) == (
        "compile", "inline", "warn", "allow_gemm_conv")
    assert bcfg.seed == 9 and not bcfg.alt_shapes and not bcfg.check_fp64


# --- the store -----------------------------------------------------------------------------------
def test_store_round_trip_is_atomic(tmp_path):
    store = cb.BaselineStore(tmp_path / "store")
    key = cb.baseline_key(b"task", EvalConfig(), ENV)
    assert store.get(key) is None
    path = store.put(record(key))
    assert store.get(key) == record(key)
    assert sorted(p.name for p in store.folder.iterdir()) == [path.name]  # no temporary file left behind
    with pytest.raises(ValueError):
        store.put({"key": key, "eager_ms": 0.0, "compile_ms": 1.0})  # never a record the derivation cannot use
    with pytest.raises(ValueError):
        store.path("../escape")


@pytest.mark.parametrize("text", ['{"key": "', "", "[]", '{"eager_ms": 1.0}', "\xff"])
def test_corrupt_or_partial_record_is_ignored_with_a_warning(tmp_path, caplog, text):
    store = cb.BaselineStore(tmp_path)
    key = cb.baseline_key(b"task", EvalConfig(), ENV)
    store.path(key).write_text(text)
    with caplog.at_level(logging.WARNING):
        assert store.get(key) is None
    assert "measured again" in caplog.text


def test_record_of_another_key_is_ignored(tmp_path, caplog):
    store = cb.BaselineStore(tmp_path)
    key, other = (cb.baseline_key(t, EvalConfig(), ENV) for t in (b"a", b"b"))
    store.path(key).write_text(json.dumps(record(other)))
    with caplog.at_level(logging.WARNING):
        assert store.get(key) is None
    assert "not a valid record" in caplog.text


# --- the derivation ------------------------------------------------------------------------------
def test_derived_figures_carry_the_compiled_to_eager_ratio_over():
    fig = cb.derived_figures(baseline_ms=2.0, speedup=4.0, speedup_ci=[3.8, 4.2],
                             record=record("0" * 64, eager=1.0, compile_=0.5))
    assert fig["compile_ms"] == pytest.approx(1.0)  # today's eager 2.0 ms x (0.5 / 1.0)
    assert fig["speedup_vs_compile"] == pytest.approx(2.0)  # = compile_ms / candidate_ms = 1.0 / 0.5
    assert fig["compile_speedup_ci"] == pytest.approx([1.9, 2.1])
    slower = cb.derived_figures(baseline_ms=3.0, speedup=None, speedup_ci=None, record=record("0" * 64, 1.0, 2.0))
    assert slower == {"compile_ms": pytest.approx(6.0), "ratio": pytest.approx(2.0)}


def test_apply_record_fills_the_fields_the_reports_read():
    key = "a" * 64
    res = EvalResult(status="ok", correct=True, speedup=4.0, speedup_ci=[3.8, 4.2], candidate_ms=0.5,
                     baseline_ms=2.0, details={"timing": {"candidate": {}, "reference": {}}})
    cb.apply_record(res, record(key), measured_now=True)
    assert res.compile_ms == pytest.approx(1.0) and res.compile_speedup_ci == pytest.approx([1.9, 2.1])
    assert res.details["speedup_vs_compile"] == pytest.approx(res.compile_ms / res.candidate_ms)
    comp = res.details["timing"]["compile"]
    assert (comp["source"], comp["key"], comp["measured"], comp["measured_now"]) == (
        "baseline worker", key, record(key), True)
    assert comp["iqr_ms"] == pytest.approx(0.04)  # the baseline's IQR on today's eager scale
    failed = EvalResult(status="mismatch")
    cb.apply_record(failed, record(key), measured_now=False)
    assert failed.compile_ms is None and "timing" not in failed.details


def test_record_from_a_failed_baseline_worker_is_one_line():
    res = EvalResult(status="runtime_error", message="boom\nTraceback (most recent call last):\n  ...")
    rec, why = cb.record_from_result(res, key="b" * 64, env=ENV, task_bytes=b"t", config=EvalConfig())
    assert rec is None and why == "runtime_error: boom"
    ok = EvalResult(status="ok", details={"gpu": {"name": "NVIDIA A100"},
                                          "timing": {"reference": {"median_ms": 1.0}, "compile": {"median_ms": 2.0}}})
    rec, why = cb.record_from_result(ok, key="b" * 64, env=ENV, task_bytes=b"t", config=EvalConfig())
    assert rec is None and "NVIDIA A100" in why  # a record is never filed under another GPU's key


# --- seeding -------------------------------------------------------------------------------------
def test_seed_takes_the_record_of_the_key_computed_here_only(tmp_path):
    cfg = EvalConfig(baseline="compile", cache_dir=str(tmp_path / "cache"))
    here = cb.baseline_key(ADD_SMALL.read_bytes(), cfg, cb.environment())
    elsewhere = cb.baseline_key(ADD_SMALL.read_bytes(), cfg, dataclasses.replace(cb.environment(), gpu="other"))
    assert seed_compile_baselines(ADD_SMALL, cfg, [record(elsewhere)]) == 0
    assert not compile_baseline_store(cfg).path(elsewhere).exists()
    assert seed_compile_baselines(ADD_SMALL, cfg, [record(elsewhere), record(here, eager=2.0)]) == 1
    assert compile_baseline_store(cfg).get(here)["eager_ms"] == 2.0
    assert seed_compile_baselines(ADD_SMALL, cfg, [record(here, eager=3.0)]) == 0  # the stored one stays
    inline = dataclasses.replace(cfg, compile_baseline="inline")
    assert seed_compile_baselines(ADD_SMALL, inline, [record(here)]) == 0


def test_seed_files_a_record_of_the_legacy_key_under_todays_key(tmp_path):
    cfg = EvalConfig(baseline="compile", cache_dir=str(tmp_path / "cache"))
    env = cb.environment()
    here = cb.baseline_key(ADD_SMALL.read_bytes(), cfg, env)
    legacy = cb.legacy_key(ADD_SMALL.read_bytes(), cfg, env)
    other_seed = cb.legacy_key(ADD_SMALL.read_bytes(), dataclasses.replace(cfg, seed=cfg.seed + 1), env)
    assert seed_compile_baselines(ADD_SMALL, cfg, [record(other_seed)]) == 0  # a /1 key of another config
    assert seed_compile_baselines(ADD_SMALL, cfg, [record(legacy, eager=4.0)]) == 1
    stored = compile_baseline_store(cfg).get(here)
    assert stored["eager_ms"] == 4.0 and stored["legacy_key"] == legacy and stored["schema"] == cb.SCHEMA
    # today's key wins over a legacy one in the same batch
    cfg2 = dataclasses.replace(cfg, cache_dir=str(tmp_path / "cache2"))
    assert seed_compile_baselines(ADD_SMALL, cfg2, [record(legacy, eager=4.0), record(here, eager=5.0)]) == 1
    assert compile_baseline_store(cfg2).get(here)["eager_ms"] == 5.0


def _run_with_records(store: RunStore, task: Path, run_id: str, records: list[dict[str, Any]],
                      seed: int | None = None) -> Any:
    run = store.create(task, {"model": "m", "options": {}, "harness": {"baseline": "compile"}}, run_id=run_id)
    for i, rec in enumerate(records):
        result = EvalResult(status="ok", correct=True, details={"timing": {"compile": {
            "median_ms": 1.0, "source": "baseline worker", "key": rec["key"], "measured": rec}}}).to_dict()
        data = {"candidate": f"candidates/c{i}.py", "result": result} | ({"seed": seed} if seed is not None else {})
        run.log.append("gpu", "eval", data, step=f"r0{i}.eval")
    return run


def test_gpu_side_seeds_the_store_from_matching_run_records_only(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELSKILL_HARNESS_BUILD_CACHE", str(cache))
    task = tmp_path / "add.py"
    task.write_text(ADD_SMALL.read_text())
    env = cb.environment()
    store = RunStore(tmp_path / "runs")
    first = _run_with_records(store, task, "000-add", [])
    cfg = gpu_side.HarnessGPU.config(first.path)  # what a run with {"baseline": "compile"} evaluates with
    assert cfg.baseline == "compile" and cfg.compile_baseline == "once"
    cfg_verify = gpu_side.HarnessGPU.config(first.path, 20261202)
    here, verify = (cb.baseline_key(first.task_path.read_bytes(), c, env) for c in (cfg, cfg_verify))
    assert here == verify  # the verification on another seed shares the run's baseline
    legacy = cb.legacy_key(first.task_path.read_bytes(), cfg, env)  # what a run of session 5 carries
    other_gpu = cb.baseline_key(first.task_path.read_bytes(), cfg, dataclasses.replace(env, gpu="NVIDIA B200"))
    other_task = cb.baseline_key(b"another task", cfg, env)
    runs = [first, _run_with_records(store, task, "001-add", [record(other_gpu), record(legacy)]),
            _run_with_records(store, task, "002-add", [record(other_task)], seed=20261202)]
    assert gpu_side.HarnessGPU(allow_cpu=True).seed_compile_baselines(runs) == 1
    folder = cache / cb.STORE_DIR
    assert sorted(p.name for p in folder.glob("*.json")) == [f"{here}.json"]
    assert json.loads((folder / f"{here}.json").read_text())["legacy_key"] == legacy
    assert gpu_side.seed_compile_baselines(runs, gpu_side.HarnessGPU.config) == 0  # already there


# --- the measurement, through a real worker (CPU here) ------------------------------------------------
@pytest.mark.slow  # one torch.compile of the reference on the CPU (about 20 s on the 2-core CI machine)
def test_baseline_is_measured_once_stored_and_remeasured_when_corrupt(tmp_path, caplog):
    cfg = EvalConfig(baseline="compile", cache_dir=str(tmp_path), timing_trials=20)
    key = cb.baseline_key(ADD_SMALL.read_bytes(), cfg, cb.environment())
    store = compile_baseline_store(cfg)
    store.folder.mkdir(parents=True)
    store.path(key).write_text('{"key": "' + key)  # a partial file, as a killed writer would leave one
    with caplog.at_level(logging.WARNING):
        first, measured_now, note = compile_baseline_record(ADD_SMALL, cfg, None)
    assert "measured again" in caplog.text
    assert measured_now and note == "" and first["key"] == key, note
    assert first["eager_ms"] > 0 and first["compile_ms"] > 0 and first["trials"] >= 20
    assert (first["gpu"], first["torch"]) == (cb.environment().gpu, cb.environment().torch)
    assert store.get(key) == first
    again, measured_now, note = compile_baseline_record(ADD_SMALL, cfg, None)  # the second candidate's turn
    assert again == first and not measured_now and note == ""


def test_a_baseline_that_cannot_be_measured_is_a_one_line_note(tmp_path):
    cfg = EvalConfig(baseline="compile", cache_dir=str(tmp_path), run_timeout_s=1.0)
    record_, measured_now, note = compile_baseline_record(ADD_SMALL, cfg, None)
    assert record_ is None and not measured_now
    assert note.startswith("compile baseline worker failed (timeout") and "\n" not in note
    assert "torch.compile was timed in this candidate's worker instead" in note
    assert list(compile_baseline_store(cfg).folder.glob("*.json")) == []  # a failure is never stored
    missing = compile_baseline_record(tmp_path / "gone.py", cfg, None)
    assert missing[0] is None and missing[2].startswith("compile baseline unavailable (FileNotFoundError")


# --- the real path on a GPU -----------------------------------------------------------------------
def _worker_seconds(results: list[EvalResult]) -> float:
    total = 0.0
    for res in results:
        total += float(res.details["worker_seconds"])
        comp = res.details.get("timing", {}).get("compile", {})
        if comp.get("measured_now"):
            total += float(comp["measured"]["worker_seconds"])
    return total


@pytest.mark.gpu
def test_two_candidates_of_one_task_share_one_baseline_measurement(tmp_path):
    """On a GPU: the same two candidates with ``inline`` (torch.compile in each worker) and ``once`` (one
    baseline worker, then eager only in each candidate's worker)."""
    task = str(CASES / "tasks" / "add.py")
    names = ("good_add_fastpath", "good_add_triton")
    figures = {}
    for mode in ("inline", "once"):
        cfg = EvalConfig(baseline="compile", compile_baseline=mode, cache_dir=str(tmp_path / mode),
                         timing_trials=50)
        jobs = [EvalJob(task, str(CASES / "gpu" / f"{n}.py"), cfg, tag=n) for n in names]
        results = LocalEvaluator(cfg).submit(jobs)
        assert all(r.status == "ok" and r.compile_ms for r in results), [(r.status, r.message) for r in results]
        figures[mode] = (results, _worker_seconds(results))
    once, once_s = figures["once"]
    _inline, inline_s = figures["inline"]
    stored = list((tmp_path / "once" / cb.STORE_DIR).glob("*.json"))
    assert len(stored) == 1
    comps = [r.details["timing"]["compile"] for r in once]
    assert [c["source"] for c in comps] == ["baseline worker"] * 2 and sum(c["measured_now"] for c in comps) == 1
    assert all("compile" not in r.details["timing"]["backend_settings"] for r in once)  # no compile in the worker
    assert all("compile_baseline" not in r.details for r in once)
    for r in once:
        assert r.details["speedup_vs_compile"] == pytest.approx(r.compile_ms / r.candidate_ms, rel=1e-6)
    # the worker-seconds of both modes are reported, not compared: a timing is no test (the inductor cache the
    # second inline worker hits made "once" the slower of the two for two candidates on an H100, 13.8 s
    # against 12.3 s); benchmarks/ measures where sharing the baseline pays
    print(f"worker seconds: once {once_s:.3f} (baseline worker included), inline {inline_s:.3f}")
