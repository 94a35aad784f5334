"""The GPU pool runs again a job whose worker died (never a candidate's own failure), on another slot where
there is one, and stamps every result with its provenance. Real pool threads; the backend is a stand-in only
at the worker-death boundary."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kernelskill.pipeline.runs.gpu_pool import GPUJob, GPUPool, JobLost, WorkerLost, backend_info, worker_died


class Dying:
    """Slots 0 and 1; ``deaths`` tries die under their job (``error`` raised, or a result marked as the
    harness's own failure), then every try returns ``result``."""

    name = "stand-in GPU"
    spec = "tests:Dying"

    def __init__(self, deaths: int, result: dict[str, Any] | None = None, error: BaseException | None = None,
                 harness: bool = False, slots: int = 2) -> None:
        self.deaths, self.error, self.harness = deaths, error or WorkerLost("worker process vanished"), harness
        self.result = result or {"status": "ok", "correct": True, "speedup": 1.5, "details": {}}
        self.calls: list[Any] = []
        self._slots = slots
        self._lock = threading.Lock()

    def slots(self) -> list[Any]:
        return list(range(self._slots))

    def device(self, slot: Any) -> str:
        return f"stand-in GPU (cuda:{slot})"

    def prepare(self, job: GPUJob) -> None:
        return None

    def run(self, job: GPUJob, slot: Any) -> dict[str, Any]:
        with self._lock:
            self.calls.append(slot)
            dies = len(self.calls) <= self.deaths
        if dies and self.harness:
            return {"status": "runtime_error", "correct": False, "message": "CUDA unavailable in the worker",
                    "details": {"harness_failure": True}}
        if dies:
            raise self.error
        return {**self.result, "details": dict(self.result.get("details") or {})}


def job(tmp_path: Path, tag: str = "run:r01.eval") -> GPUJob:
    return GPUJob(kind="eval", task=tmp_path / "task.py", candidate=tmp_path / "c.py", run_dir=tmp_path, tag=tag)


def test_a_job_whose_worker_dies_once_is_run_again_on_the_other_slot(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    backend = Dying(deaths=1)
    with GPUPool(backend) as pool:
        result = pool.submit(job(tmp_path)).result(timeout=30)
        stats = pool.stats
    assert result["speedup"] == 1.5
    assert result["details"] == {"evaluator": "tests:Dying", "device": f"stand-in GPU (cuda:{backend.calls[1]})",
                                 "attempts": 2}
    assert len(backend.calls) == 2 and backend.calls[0] != backend.calls[1]  # the retry went elsewhere
    assert (stats.retries, stats.lost, stats.done) == (1, 0, 1)
    assert "run:r01.eval: the worker on slot" in caplog.text and "try 2 of 3" in caplog.text


def test_a_job_whose_worker_always_dies_fails_clearly_after_every_try(tmp_path: Path) -> None:
    backend = Dying(deaths=99)
    with GPUPool(backend, retries=2) as pool:
        future = pool.submit(job(tmp_path))
        with pytest.raises(JobLost) as lost:
            future.result(timeout=30)
        stats = pool.stats
    assert len(backend.calls) == 3 and lost.value.attempts == 3
    message = str(lost.value)
    assert "run:r01.eval" in message and "3 attempt(s)" in message and "WorkerLost: worker process vanished" in message
    assert (stats.retries, stats.lost) == (2, 1)


def test_a_candidates_own_failure_is_not_retried(tmp_path: Path) -> None:
    mismatch = {"status": "mismatch", "correct": False, "message": "max abs error 3.0", "details": {}}
    backend = Dying(deaths=0, result=mismatch)
    with GPUPool(backend) as pool:
        result = pool.submit(job(tmp_path)).result(timeout=30)
        assert pool.stats.retries == 0
    assert result["status"] == "mismatch" and result["details"]["attempts"] == 1 and len(backend.calls) == 1
    crashing = Dying(deaths=99, error=RuntimeError("the candidate's own exception"))
    with GPUPool(crashing) as pool, pytest.raises(RuntimeError, match="own exception"):
        pool.submit(job(tmp_path)).result(timeout=30)
    assert len(crashing.calls) == 1


def test_a_harness_failure_is_retried_but_out_of_memory_is_the_tasks(tmp_path: Path) -> None:
    backend = Dying(deaths=1, harness=True)
    with GPUPool(backend) as pool:
        assert pool.submit(job(tmp_path)).result(timeout=30)["details"]["attempts"] == 2
    oom = {"status": "oom", "correct": False, "details": {"harness_failure": True, "oom_in": "harness"}}
    backend = Dying(deaths=0, result=oom)
    with GPUPool(backend) as pool:
        assert pool.submit(job(tmp_path)).result(timeout=30)["status"] == "oom"
    assert len(backend.calls) == 1


def test_one_slot_retries_on_itself_and_many_jobs_all_resolve(tmp_path: Path) -> None:
    backend = Dying(deaths=3, slots=1)
    with GPUPool(backend, retries=3) as pool:
        futures = [pool.submit(job(tmp_path, f"run:{i}")) for i in range(6)]
        results = [f.result(timeout=30) for f in futures]
        stats = pool.stats
    assert sum(r["details"]["attempts"] - 1 for r in results) == 3 == stats.retries
    assert stats.done == 6 and set(backend.calls) == {0}


def test_rays_worker_deaths_are_recognized_by_name() -> None:
    exceptions = pytest.importorskip("ray.exceptions")
    assert worker_died(exceptions.WorkerCrashedError())
    assert worker_died(exceptions.NodeDiedError("node gone"))
    assert not worker_died(exceptions.RayTaskError("f", "traceback", ValueError("the task's own error")))
    assert not worker_died(ValueError("WorkerCrashedError"))


def test_backend_info_names_the_evaluator_and_its_slots() -> None:
    assert backend_info(Dying(0)) == {"evaluator": "tests:Dying", "device": "stand-in GPU", "slots": 2}
