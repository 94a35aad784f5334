"""The GPU pool: every GPU step of every run of a suite goes through one queue, served by one worker per
GPU (or per Ray GPU), with the CPU-only part of each step (building the candidate) done ahead on a pool
of build threads so that a GPU never waits for a compiler.

A step is a :class:`GPUJob` (evaluate or profile one candidate of one run); :meth:`GPUPool.submit`
returns a :class:`~concurrent.futures.Future` that resolves the moment that one job is measured, so
the caller records it at once (never after a batch). With a deadline, a worker does not start a job
that would end after it (judged by the longest job of that kind seen so far): the future then fails
with :class:`BudgetExceeded` and the step stays unrecorded, to be run by the next session.

Backends (what a worker calls): :class:`HarnessBackend` (the harness on this machine, through its
``Evaluator`` protocol: ``LocalEvaluator(gpus=[g]).submit([job])``), :class:`LoopEvaluatorBackend`
(anything with the loop's ``evaluate`` / ``profile`` seam: a plugin, or a test's stand-in at the GPU
boundary) and ``ray_backend.RayBackend`` (builds and evaluations as Ray tasks).

Standard library only (the harness and torch are imported lazily): the GPU side of a split run uses
this module on a bare GPU box.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

KINDS = ("eval", "profile")


class NotStarted(Exception):
    """The job was not started; its step stays pending (nothing was measured, nothing is recorded)."""


class BudgetExceeded(NotStarted):
    """The job was not started: it would have ended after the deadline."""


class Cancelled(NotStarted):
    """The job was not started: the pool was left because of an error or a signal (``cancel``)."""


@dataclass
class GPUJob:
    kind: str  # eval | profile
    task: Path
    candidate: Path
    run_dir: Path  # the run whose manifest holds the harness settings
    seed: int | None = None
    tag: str = ""
    future: Future[dict[str, Any]] = field(default_factory=Future)
    submitted: float = field(default_factory=time.monotonic)
    extra: dict[str, Any] = field(default_factory=dict)  # what a backend's prepare() leaves for its run()


class Backend(Protocol):
    name: str  # the device, as a report names it ("NVIDIA H200", "cpu", "scripted")

    def slots(self) -> list[Any]: ...  # one GPU worker per slot

    def prepare(self, job: GPUJob) -> None: ...  # CPU-only work ahead of the GPU (builds); may do nothing

    def run(self, job: GPUJob, slot: Any) -> dict[str, Any]: ...  # EvalResult / ProfileResult as a dict


def gpu_name(slot: int | None = None) -> str:
    try:
        import torch  # lazy: a heavy optional import for a name

        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(slot or 0))
    except Exception:  # noqa: BLE001 - no torch, no driver: the device is the CPU
        pass
    return "cpu"


class HarnessBackend:
    """The harness on this machine: one slot per visible GPU (one CPU slot without CUDA).

    ``config(run_dir, seed)`` returns the run's ``EvalConfig`` (its manifest's harness settings)."""

    def __init__(self, config: Callable[[Path, int | None], Any], gpus: Sequence[int] | None = None) -> None:
        from kernelskill.pipeline.harness.api import visible_gpus

        self.config = config
        self._gpus = list(gpus) if gpus is not None else visible_gpus()
        self.name = gpu_name(self._gpus[0] if self._gpus else None)

    def slots(self) -> list[Any]:
        return list(self._gpus) or [None]

    def prepare(self, job: GPUJob) -> None:
        from kernelskill.pipeline.harness import build

        try:
            build(job.candidate, self.config(job.run_dir, job.seed))  # cached by source hash
        except Exception as exc:  # noqa: BLE001 - the GPU phase reports a broken candidate as its result
            log.info("%s: build ahead failed (%s); the evaluation reports it", job.tag, exc)

    def run(self, job: GPUJob, slot: Any) -> dict[str, Any]:
        from kernelskill.pipeline.harness import EvalJob, LocalEvaluator, profile

        cfg = self.config(job.run_dir, job.seed)
        if job.kind == "profile":
            if slot is not None:
                cfg.device = slot
            return profile(job.task, job.candidate, cfg).to_dict()
        evaluator = LocalEvaluator(config=cfg, gpus=[slot] if slot is not None else [], build_jobs=1)
        [result] = evaluator.submit([EvalJob(task=str(job.task), candidate=str(job.candidate), config=cfg,
                                             tag=job.tag)])
        out = result.to_dict()
        out.setdefault("details", {})["gpu_name"] = self.name
        return out


class LoopEvaluatorBackend:
    """Anything with the loop's seam (``evaluate(task, candidate, *, seed)``, ``profile(task, candidate)``)
    as ``slots`` parallel workers."""

    def __init__(self, evaluator: Any, slots: int = 1, name: str | None = None) -> None:
        self.evaluator = evaluator
        self._slots = max(1, slots)
        self.name = name or getattr(evaluator, "gpu_name", None) or type(evaluator).__name__

    def slots(self) -> list[Any]:
        return list(range(self._slots))

    def prepare(self, job: GPUJob) -> None:
        return None

    def run(self, job: GPUJob, slot: Any) -> dict[str, Any]:
        if job.kind == "profile":
            return dict(self.evaluator.profile(job.task, job.candidate))
        if job.seed is not None:
            return dict(self.evaluator.evaluate(job.task, job.candidate, seed=job.seed))
        return dict(self.evaluator.evaluate(job.task, job.candidate))


@dataclass
class PoolStats:
    slots: int
    submitted: int = 0
    done: int = 0
    running: int = 0
    refused: int = 0  # not started: past the budget
    busy_s: float = 0.0  # summed over slots
    first_start: float | None = None
    last_end: float | None = None

    def busy_share(self, now: float | None = None) -> float | None:
        """Busy GPU-seconds over slot-seconds since the first job started (None before)."""
        if self.first_start is None:
            return None
        end = now if now is not None and self.running else (self.last_end or now or time.monotonic())
        span = max(end - self.first_start, 1e-9) * self.slots
        return min(1.0, self.busy_s / span)


class GPUPool:
    """``submit(job) -> Future``; ``close()`` waits for the workers. Use as a context manager."""

    def __init__(self, backend: Backend, *, build_jobs: int | None = None, deadline: float | None = None,
                 estimates: dict[str, float] | None = None,
                 on_change: Callable[[PoolStats], None] | None = None) -> None:
        self.backend = backend
        self.deadline = deadline  # time.monotonic() value
        self.estimates = {"eval": 0.0, "profile": 0.0} | (estimates or {})
        self.on_change = on_change
        self._slots = backend.slots()
        self.stats = PoolStats(slots=len(self._slots))
        self._queue: queue.Queue[GPUJob | None] = queue.Queue()
        self._cancelled = False
        self._lock = threading.Lock()
        self._builds = ThreadPoolExecutor(max_workers=build_jobs or max(1, (os.cpu_count() or 2) * 3 // 4),
                                          thread_name_prefix="ks-build")
        self._workers = [threading.Thread(target=self._work, args=(slot,), name=f"ks-gpu-{slot}", daemon=True)
                         for slot in self._slots]
        for worker in self._workers:
            worker.start()

    def __enter__(self) -> GPUPool:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        self.cancel()  # leaving on an error or a signal: start nothing more, and do not wait for running jobs
        self.close(wait=False)

    # the caller's side ------------------------------------------------------------------------------
    def submit(self, job: GPUJob) -> Future[dict[str, Any]]:
        if job.kind not in KINDS:
            raise ValueError(f"unknown GPU job kind {job.kind!r}")
        with self._lock:
            self.stats.submitted += 1
        if self._past_budget(job):
            self._refuse(job)
            return job.future
        self._builds.submit(self._prepare, job)
        return job.future

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def cancel(self) -> None:
        """Start no more jobs: each queued one fails with :class:`Cancelled` (running ones finish)."""
        self._cancelled = True

    def close(self, wait: bool = True) -> None:
        self._builds.shutdown(wait=wait, cancel_futures=not wait)
        for _ in self._workers:
            self._queue.put(None)
        if wait:
            for worker in self._workers:
                worker.join()

    # the pool's side --------------------------------------------------------------------------------
    def _past_budget(self, job: GPUJob) -> bool:
        left = self.time_left()
        return left is not None and left < self.estimates.get(job.kind, 0.0)

    def _refuse(self, job: GPUJob) -> None:
        with self._lock:
            self.stats.refused += 1
        job.future.set_exception(BudgetExceeded(f"{job.tag or job.candidate.name}: not started, "
                                                f"{max(0.0, self.time_left() or 0.0):.0f} s left"))
        self._changed()

    def _prepare(self, job: GPUJob) -> None:
        try:
            if not (self._cancelled or self._past_budget(job)):
                self.backend.prepare(job)
        finally:
            self._queue.put(job)

    def _work(self, slot: Any) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if self._cancelled:
                with self._lock:
                    self.stats.refused += 1
                job.future.set_exception(Cancelled(f"{job.tag or job.candidate.name}: not started, the pool was left"))
                continue
            if self._past_budget(job):
                self._refuse(job)
                continue
            start = time.monotonic()
            with self._lock:
                self.stats.running += 1
                if self.stats.first_start is None:
                    self.stats.first_start = start
            self._changed()
            try:
                result = self.backend.run(job, slot)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who decides
                result, error = None, exc
            else:
                error = None
            end = time.monotonic()
            with self._lock:
                self.stats.running -= 1
                self.stats.done += 1
                self.stats.busy_s += end - start
                self.stats.last_end = end
                self.estimates[job.kind] = max(self.estimates.get(job.kind, 0.0), end - start)
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(result or {})
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change(self.stats)
            except Exception:  # noqa: BLE001 - a display never stops the GPU
                log.exception("progress callback failed")
