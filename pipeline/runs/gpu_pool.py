"""The GPU pool: every GPU step of every run of a suite goes through one queue, served by one worker per
GPU (or per Ray GPU), with the CPU-only part of each step (building the candidate) done ahead on a pool
of build threads so that a GPU never waits for a compiler.

A step is a :class:`GPUJob` (evaluate or profile one candidate of one run); :meth:`GPUPool.submit`
returns a :class:`~concurrent.futures.Future` that resolves the moment that one job is measured, so
the caller records it at once (never after a batch). With a deadline, a worker does not start a job
that would end after it (judged by the longest job of that kind seen so far): the future then fails
with :class:`BudgetExceeded` and the step stays unrecorded, to be run by the next session.

A job whose *worker* dies (the infrastructure, not the candidate: :class:`WorkerLost`, a Ray worker or node
that died, a harness result marked as the harness's own failure other than an out-of-memory error) is run
again, on another slot where there is one, up to ``retries`` times; each retry is logged and counted in
:attr:`PoolStats.retries`. A candidate's own failure (compile error, mismatch, its own crash as the harness
judged it) is a result, never retried. After the last try the future fails with :class:`JobLost`, which names
the job, its attempts and the last error: the step stays unrecorded, so nothing is charged to the candidate.

Every result a job returns carries its provenance in ``details``: ``evaluator`` (``local``, ``ray``, the
``MODULE:ATTR`` spec or the backend's name), ``device`` (the GPU name and index, a Ray node and GPU ids, or
``cpu``) and ``attempts`` (how many tries it took), stamped here so that every backend gets it; a profile's
result also its ``worker_seconds`` where the backend named none: how long its try held its slot (the time it
waited in the queue is not GPU time), which the run's profile event records as its seconds.

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
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

KINDS = ("eval", "profile")
DEFAULT_RETRIES = 2
#: Ray's exceptions for a worker, actor, node or object lost under a task (by name: Ray is not imported here)
RAY_WORKER_DEATHS = frozenset({"WorkerCrashedError", "NodeDiedError", "RayActorError", "ActorDiedError",
                               "ActorUnavailableError", "ObjectLostError", "OwnerDiedError",
                               "ObjectReconstructionFailedError", "ObjectFetchTimedOutError", "RaySystemError",
                               "LocalRayletDiedError"})


class NotStarted(Exception):
    """The job was not started; its step stays pending (nothing was measured, nothing is recorded)."""


class BudgetExceeded(NotStarted):
    """The job was not started: it would have ended after the deadline."""


class Cancelled(NotStarted):
    """The job was not started: the pool was left because of an error or a signal (``cancel``)."""


class WorkerLost(Exception):
    """What a backend raises when the worker (process, node, GPU) that ran a job died under it: not the
    candidate's failure, so the pool runs the job again elsewhere."""


class JobLost(RuntimeError):
    """Every try of a job lost its worker: nothing was measured, the step stays unrecorded."""

    def __init__(self, job: GPUJob, attempts: int, last: BaseException) -> None:
        self.tag, self.attempts, self.last = job.tag or job.candidate.name, attempts, last
        super().__init__(f"{self.tag}: {job.kind} lost its worker on each of {attempts} attempt(s) "
                         f"(slots {', '.join(map(str, job.tried))}); last error: {type(last).__name__}: {last}")


def worker_died(error: BaseException) -> bool:
    """Is ``error`` the death of the worker under a job (retried), rather than a failure of the job itself?"""
    if isinstance(error, WorkerLost):
        return True
    return any(cls.__module__.split(".")[0] == "ray" and cls.__name__ in RAY_WORKER_DEATHS
               for cls in type(error).__mro__)


def harness_lost(result: dict[str, Any]) -> str | None:
    """Why a harness result is its own failure that another try may not have (the worker could not reach its
    GPU...), or None. Out-of-memory is left alone: it is a limit of the task, the same on every GPU."""
    details = result.get("details") or {}
    if not isinstance(details, dict) or not details.get("harness_failure"):
        return None
    if details.get("oom_in") or result.get("status") == "oom":
        return None
    return str(result.get("message") or "the harness's own failure")


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
    tried: list[Any] = field(default_factory=list)  # the slots of the tries so far (one per attempt)
    seconds: float | None = None  # how long its last try held its slot


class Backend(Protocol):
    """Also read when present: ``spec`` (who evaluates, as the user named it: ``local``, ``ray``,
    ``MODULE:ATTR``; else ``name``), ``device(slot) -> str`` (the device a slot runs on; a result's own
    ``details.device`` wins) and ``info() -> dict`` (what a suite records about the evaluator)."""

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
        self.spec = "local"

    def slots(self) -> list[Any]:
        return list(self._gpus) or [None]

    def device(self, slot: Any) -> str:
        return "cpu" if slot is None else f"{gpu_name(slot)} (cuda:{slot})"

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
        self.spec = self.name

    def slots(self) -> list[Any]:
        return list(range(self._slots))

    def device(self, slot: Any) -> str:
        return f"{self.name} (slot {slot})"

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
    retries: int = 0  # tries run again because their worker died
    lost: int = 0  # jobs whose every try lost its worker (JobLost)
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
    """``submit(job) -> Future``; ``close()`` waits for the workers. Use as a context manager.

    ``retries``: how often a job whose worker died is run again (on another slot where there is one)."""

    def __init__(self, backend: Backend, *, build_jobs: int | None = None, deadline: float | None = None,
                 estimates: dict[str, float] | None = None, retries: int = DEFAULT_RETRIES,
                 on_change: Callable[[PoolStats], None] | None = None) -> None:
        if retries < 0:
            raise ValueError(f"retries: {retries} is negative")
        self.backend = backend
        self.deadline = deadline  # time.monotonic() value
        self.estimates = {"eval": 0.0, "profile": 0.0} | (estimates or {})
        self.retries = retries
        self.on_change = on_change
        self._slots = backend.slots()
        self.stats = PoolStats(slots=len(self._slots))
        self._evaluator = str(getattr(backend, "spec", None) or backend.name)
        self._pending: list[GPUJob] = []  # built, waiting for a GPU worker (a retry joins at the front)
        self._taken = 0  # jobs a worker holds (a retry may come back from one of them)
        self._closed = False
        self._cancelled = False
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
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
        with self._ready:
            self._cancelled = True
            self._ready.notify_all()

    def close(self, wait: bool = True) -> None:
        self._builds.shutdown(wait=wait, cancel_futures=not wait)
        with self._ready:
            self._closed = True
            self._ready.notify_all()
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
            with self._ready:
                self._pending.append(job)
                self._ready.notify_all()

    def _fits(self, job: GPUJob, slot: Any) -> bool:
        """A retry goes to a slot it has not tried while there is one; else to any."""
        return slot not in job.tried or all(s in job.tried for s in self._slots)

    def _next(self, slot: Any) -> GPUJob | None:
        """The first waiting job this slot may take; None once the pool is closed and nothing can come."""
        with self._ready:
            while True:
                job = next((j for j in self._pending if self._cancelled or self._fits(j, slot)), None)
                if job is not None:
                    self._pending.remove(job)
                    self._taken += 1
                    return job
                if self._closed and not self._pending and not self._taken:
                    return None
                self._ready.wait()

    def _release(self, job: GPUJob | None = None) -> None:
        """A worker is done with a job (``job``: put back for another try)."""
        with self._ready:
            self._taken -= 1
            if job is not None:
                self._pending.insert(0, job)
            self._ready.notify_all()

    def _work(self, slot: Any) -> None:
        while (job := self._next(slot)) is not None:
            again = None
            try:
                again = self._serve(job, slot)
            finally:
                self._release(again)

    def _serve(self, job: GPUJob, slot: Any) -> GPUJob | None:
        """Run one try of ``job`` on ``slot``; returns the job when it should be tried again."""
        if self._cancelled:
            with self._lock:
                self.stats.refused += 1
            job.future.set_exception(Cancelled(f"{job.tag or job.candidate.name}: not started, the pool was left"))
            return None
        if self._past_budget(job):
            self._refuse(job)
            return None
        job.tried.append(slot)
        result, error = self._attempt(job, slot)
        lost = (error if error is not None and worker_died(error)
                else WorkerLost(why) if error is None and (why := harness_lost(result or {})) else None)
        if lost is not None:
            if len(job.tried) <= self.retries:
                with self._lock:
                    self.stats.retries += 1
                log.warning("%s: the worker on slot %s died (%s: %s); try %d of %d goes to another slot",
                            job.tag or job.candidate.name, slot, type(lost).__name__, lost, len(job.tried) + 1,
                            self.retries + 1)
                return job
            with self._lock:
                self.stats.lost += 1
            error = JobLost(job, len(job.tried), lost)
            log.error("%s", error)
        with self._lock:
            self.stats.done += 1
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(self._stamped(result or {}, job, slot))
        self._changed()
        return None

    def _attempt(self, job: GPUJob, slot: Any) -> tuple[dict[str, Any] | None, BaseException | None]:
        start = time.monotonic()
        with self._lock:
            self.stats.running += 1
            if self.stats.first_start is None:
                self.stats.first_start = start
        self._changed()
        result: dict[str, Any] | None = None
        error: BaseException | None = None
        try:
            result = self.backend.run(job, slot)
        except BaseException as exc:  # noqa: BLE001 - retried, or handed to the caller, who decides
            error = exc
        end = time.monotonic()
        job.seconds = end - start
        with self._lock:
            self.stats.running -= 1
            self.stats.busy_s += end - start
            self.stats.last_end = end
            if error is None or not worker_died(error):
                self.estimates[job.kind] = max(self.estimates.get(job.kind, 0.0), end - start)
        return result, error

    def _stamped(self, result: dict[str, Any], job: GPUJob, slot: Any) -> dict[str, Any]:
        """The result with its provenance: who evaluated it, on which device, after how many tries."""
        details = result.get("details")
        if not isinstance(details, dict):
            details = result["details"] = {}
        details["evaluator"] = self._evaluator
        if not details.get("device"):
            device = getattr(self.backend, "device", None)
            details["device"] = str(device(slot)) if callable(device) else f"{self.backend.name} (slot {slot})"
        details["attempts"] = len(job.tried)
        worker_s = details.get("worker_seconds")
        if job.kind == "profile" and job.seconds is not None and not isinstance(worker_s, int | float):
            details["worker_seconds"] = round(job.seconds, 3)  # a profile's GPU time: its slot's, not the queue's
        return result

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change(self.stats)
            except Exception:  # noqa: BLE001 - a display never stops the GPU
                log.exception("progress callback failed")


def backend_info(backend: Backend) -> dict[str, Any]:
    """What a suite records about who ran its GPU steps (the evaluator, the device, the slots, and what the
    backend adds: a Ray cluster's address and GPU count)."""
    info = getattr(backend, "info", None)
    return ({"evaluator": str(getattr(backend, "spec", None) or backend.name), "device": backend.name,
             "slots": len(backend.slots())} | (dict(info()) if callable(info) else {}))
