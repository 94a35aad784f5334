"""A profile's GPU seconds: recorded with its event (``data["seconds"]``) by ``run_gpu_step``, through the GPU
pool and through the GPU side's once-per-job sharing; and counted in the suite report's ``gpu_s`` next to the
evaluations' worker seconds, with the profiles recorded before that (no seconds) counted, never guessed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kernelskill.pipeline.bench.report import task_row
from kernelskill.pipeline.runs import RunStore, gpu_request, gpu_side, run_gpu_step
from kernelskill.pipeline.runs.gpu_pool import GPUJob, GPUPool, LoopEvaluatorBackend
from tests.test_bench_helpers import task_source

CSV = '"ID","Kernel Name","dram__throughput.avg.pct_of_peak_sustained_elapsed"\n"0","k","12.5"\n'


class SleepingProfiler:
    """The GPU boundary's stand-in: a profile that takes ``sleep`` seconds (and names ``worker_s`` when set)."""

    def __init__(self, sleep: float = 0.05, worker_s: float | None = None) -> None:
        self.sleep, self.worker_s, self.calls = sleep, worker_s, 0

    def evaluate(self, task: Any, candidate: Any, *, seed: int | None = None) -> dict[str, Any]:
        return {"status": "ok", "correct": True, "speedup": 1.5, "details": {"worker_seconds": 4.0}}

    def profile(self, task: Any, candidate: Any) -> dict[str, Any]:
        self.calls += 1
        time.sleep(self.sleep)
        details = {"gpu_name": "stand-in"} | ({"worker_seconds": self.worker_s} if self.worker_s is not None else {})
        return {"ok": True, "message": "1 kernel launch(es) profiled", "csv": CSV, "details": details}


def new_run(root: Path, run_id: str = "001-t", candidate: str = "x = 1\n") -> Any:
    task = root / "t.py"
    if not task.exists():
        task.write_text(task_source("relu"))
    run = RunStore(root / "runs").create(task, {"protocol": "kernelbench", "harness": {}}, run_id=run_id)
    run.write_candidate("r00.generate", candidate)
    return run


def profile_request() -> dict[str, Any]:
    return gpu_request("profile", "profile.r00.generate", "candidates/r00.generate.py")


def test_a_profile_records_its_wall_seconds(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    event = run_gpu_step(run, profile_request(), SleepingProfiler(sleep=0.05), round_=1)
    data = event["data"]
    assert data["ok"] is True and data["csv"] == "profiles/profile.r00.generate.csv"
    assert 0.05 <= data["seconds"] < 5.0 and data["seconds"] == round(data["seconds"], 3)
    assert "worker_seconds" not in (data.get("details") or {})  # the record keeps only provenance there
    # recorded once: a second call finds the event and measures nothing
    again = SleepingProfiler()
    assert run_gpu_step(run, profile_request(), again) == event and again.calls == 0


def test_a_profile_whose_result_names_a_workers_seconds_records_those(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    event = run_gpu_step(run, profile_request(), SleepingProfiler(sleep=0.0, worker_s=31.25))
    assert event["data"]["seconds"] == 31.25


def test_the_pool_stamps_the_seconds_a_profile_held_its_slot(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    with GPUPool(LoopEvaluatorBackend(SleepingProfiler(sleep=0.05))) as pool:
        profiled = pool.submit(GPUJob(kind="profile", task=run.task_path, candidate=run.path / "candidates" /
                                      "r00.generate.py", run_dir=run.path)).result()
        evaluated = pool.submit(GPUJob(kind="eval", task=run.task_path, candidate=run.path / "candidates" /
                                       "r00.generate.py", run_dir=run.path)).result()
    assert 0.05 <= profiled["details"]["worker_seconds"] < 5.0
    assert evaluated["details"]["worker_seconds"] == 4.0  # an evaluation keeps its harness worker's figure
    with GPUPool(LoopEvaluatorBackend(SleepingProfiler(sleep=0.0, worker_s=28.0))) as pool:
        named = pool.submit(GPUJob(kind="profile", task=run.task_path, candidate=run.task_path,
                                   run_dir=run.path)).result()
    assert named["details"]["worker_seconds"] == 28.0  # the backend's own figure wins


def test_a_profile_shared_by_two_runs_charges_each_the_one_measurement(tmp_path: Path) -> None:
    """An arm and its ablation's seed profile the same file: measured once, both runs carry its seconds (the
    second recording, served from the first, is not a free profile)."""
    runs = [new_run(tmp_path, f"00{i}-t") for i in (1, 2)]
    for run in runs:
        request = profile_request()
        run.log.append("loop", "run_paused", {"before": request["step"], "side": "gpu", "request": request})
    profiler = SleepingProfiler(sleep=0.05)
    rows = gpu_side.evaluate_pending(runs, profiler)
    assert profiler.calls == 1 and [r["status"] for r in rows] == ["profiled", "profiled"]
    seconds = [RunStore(tmp_path / "runs").open(r.id).log.find("profile.r00.generate", "profile")["data"]["seconds"]
               for r in runs]
    assert seconds[0] == seconds[1] >= 0.05


def test_the_report_counts_profiles_as_gpu_time_and_old_ones_as_unmeasured(tmp_path: Path) -> None:
    run = new_run(tmp_path)

    def evaluated(step: str, round_: int, worker_s: float | None, **details: Any) -> None:
        result = {"status": "ok", "correct": True, "speedup": 1.5, "candidate_ms": 1.0, "baseline_ms": 1.5,
                  "details": ({"worker_seconds": worker_s} if worker_s is not None else {}) | details}
        run.log.append("gpu", "eval", {"candidate": f"candidates/{step}.py", "result": result},
                       step=step.replace("generate", "eval").replace("optimize", "eval"), round_=round_)

    # the seed's evaluation also measured the task's torch.compile baseline: that worker is not the run's
    evaluated("r00.generate", 0, 5.0, timing={"compile": {"measured_now": True, "measured": {"worker_seconds": 60.0}}})
    run.log.append("gpu", "profile", {"candidate": "candidates/r00.generate.py", "ok": True, "message": "old"},
                   step="profile.r00.generate", round_=1)  # recorded before profiles carried seconds
    evaluated("r01.optimize", 1, 7.0)
    run_gpu_step(run, gpu_request("profile", "profile.r01.optimize", "candidates/r00.generate.py"),
                 SleepingProfiler(sleep=0.0, worker_s=30.0), round_=2)
    evaluated("r02.optimize", 2, None)  # a build that failed: no worker ran
    row = task_row({"name": "t", "run_id": run.id}, run)
    assert row["eval_s"] == 12.0 and row["profile_s"] == 30.0 and row["gpu_s"] == 42.0
    assert row["profiles"] == 2 and row["profiles_unmeasured"] == 1
    early = task_row({"name": "t", "run_id": run.id}, run, upto_round=1)
    assert early["eval_s"] == 12.0 and early["profile_s"] is None and early["gpu_s"] == 12.0
    assert early["profiles"] == 1 and early["profiles_unmeasured"] == 1


def test_a_profile_skipped_on_purpose_before_seconds_were_recorded_cost_nothing(tmp_path: Path) -> None:
    run = new_run(tmp_path)
    run.log.append("gpu", "profile", {"candidate": "candidates/r00.generate.py", "ok": False,
                                      "message": gpu_side.SKIPPED_PROFILE}, step="profile.r00.generate", round_=1)
    row = task_row({"name": "t", "run_id": run.id}, run)
    assert row["profile_s"] == 0.0 and row["profiles_unmeasured"] == 0 and row["gpu_s"] == 0.0
    assert row["eval_s"] is None


@pytest.mark.parametrize("value", [-1.0, float("nan"), True, "12"])
def test_a_profile_figure_that_is_not_a_duration_is_not_used(tmp_path: Path, value: Any) -> None:
    run = new_run(tmp_path)
    event = run_gpu_step(run, profile_request(), SleepingProfiler(sleep=0.0, worker_s=value))
    assert 0.0 <= event["data"]["seconds"] < 1.0  # the call's own wall seconds instead
