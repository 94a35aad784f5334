"""Drive every run of a suite together: one thread per active run walks its loop; the runs' LLM requests
go concurrently through the :class:`~kernelskill.pipeline.bench.llm_gate.LLMGate`, their GPU steps through
one :class:`~kernelskill.pipeline.runs.gpu_pool.GPUPool`. Each loop records its steps in its own log as
they happen (a GPU result the moment its job is measured), so a kill loses at most the steps in flight.

With a budget, nothing is started that would end after it; runs then pause (``run_paused``, before
``budget``) and the same command continues them later. Progress goes to a callback (a dict snapshot);
the library never renders.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.bench.llm_gate import LLMGate
from kernelskill.pipeline.bench.suite import Suite
from kernelskill.pipeline.loop import Loop, LoopOptions
from kernelskill.pipeline.loop.adapters import profile_numbers
from kernelskill.pipeline.runs import Paused, Run, utcnow
from kernelskill.pipeline.runs.gpu_pool import (
    Backend,
    BudgetExceeded,
    GPUJob,
    GPUPool,
    PoolStats,
    backend_info,
)

log = logging.getLogger(__name__)

#: states a run of a suite is in, in display order
STATES = ("queued", "llm", "kb", "gpu", "paused", "budget", "finished", "failed", "not started")
_GPU_PHASES = {"evaluate", "profile", "verify"}
_KB_PHASES = {"query"}


class DriveOptions(BaseModel):
    llm_concurrency: int = Field(default=8, ge=1)
    max_active: int = Field(default=32, ge=1)  # runs walking at once (threads)
    budget_s: float | None = Field(default=None, gt=0)
    build_jobs: int | None = None
    worker_retries: int = Field(default=2, ge=0)  # tries again of a GPU job whose worker died


class RunOutcome(BaseModel):
    task: str
    run_id: str | None
    state: str  # finished | paused | budget | failed | not started
    best_speedup: float | None = None
    paused_before: str | None = None
    error: str | None = None


class SuiteOutcome(BaseModel):
    runs: list[RunOutcome]
    elapsed_s: float
    gpu_busy_share: float | None = None
    gpu_jobs: int = 0
    gpu_retries: int = 0  # tries run again because their worker died
    gpu_lost: int = 0  # jobs whose every try lost its worker
    evaluator: dict[str, Any] = Field(default_factory=dict)  # who ran the GPU steps (gpu_pool.backend_info)
    llm_requests: int = 0
    rate_limited: int = 0

    def count(self, state: str) -> int:
        return sum(1 for r in self.runs if r.state == state)


class SuiteEvaluator:
    """The loop's GPU seam for one run: each step becomes a pool job; the loop blocks on its result and
    records it as soon as it comes back."""

    def __init__(self, pool: GPUPool, run: Run, on_state: Callable[[str], None]) -> None:
        self.pool, self.run, self.on_state = pool, run, on_state

    def check(self) -> None:
        return None

    def _job(self, kind: str, task: Path, candidate: Path, seed: int | None) -> dict[str, Any]:
        job = GPUJob(kind=kind, task=task, candidate=candidate, run_dir=self.run.path, seed=seed,
                     tag=f"{self.run.id}:{candidate.name}")
        self.on_state("gpu")
        try:
            return self.pool.submit(job).result()
        except BudgetExceeded as exc:
            raise Paused("budget", "gpu", None) from exc

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        return self._job("eval", task, candidate, seed)

    def evaluate_many(self, steps: Sequence[Any], *,
                      on_result: Callable[[int, dict[str, Any] | None, BaseException | None], None] | None = None
                      ) -> list[dict[str, Any] | None]:
        """A search round's candidates (``gpu_side.PendingStep``s of this run) as pool jobs all at once, so they
        build side by side and spread over every GPU; ``on_result(i, result, error)`` as each one ends. A job
        not started before the budget's end leaves its step unrecorded: the loop then pauses on it."""
        self.on_state("gpu")
        futures = [self.pool.submit(GPUJob(kind="eval", task=self.run.path / s.request["task"],
                                           candidate=self.run.path / s.request["candidate"], run_dir=self.run.path,
                                           seed=s.request.get("seed"), tag=f"{self.run.id}:{s.request['step']}"))
                   for s in steps]
        out: list[dict[str, Any] | None] = []
        for i, future in enumerate(futures):
            error = future.exception()
            out.append(None if error is not None else future.result())
            if on_result is not None:
                on_result(i, out[-1], error)
        return out

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        return self._job("profile", task, candidate, None)


class SerialRetriever:
    """One knowledge-base query at a time (the stores are opened once and shared by every run)."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever
        self._lock = threading.Lock()

    def query(self, kernel: Path, *, task: Path, profile: Path | None, protocol: str | None = None,
              precision: str | None = None) -> dict[str, Any]:
        with self._lock:
            return self.retriever.query(kernel, task=task, profile=profile, protocol=protocol, precision=precision)

    def task_advice(self, task: Path, protocol: str | None = None, precision: str | None = None) -> Any:
        """The KB arm's seed advice (``Retriever.task_advice``), one at a time like the queries; ``None`` from a
        retriever that offers none (the seed then carries no advice)."""
        ask = getattr(self.retriever, "task_advice", None)
        if ask is None:
            return None
        with self._lock:
            return ask(task, protocol=protocol, precision=precision)

    def profile_numbers(self, profile: Path) -> dict[str, Any]:
        """The profile arm's counters (``Retriever.profile_numbers``, else the loop's own reader); no store is
        read."""
        return (getattr(self.retriever, "profile_numbers", None) or profile_numbers)(profile)


class ProgressBoard:
    """What every run is doing, for the progress callback."""

    def __init__(self, suite: Suite, on_progress: Callable[[dict[str, Any]], None] | None, started: float,
                 deadline: float | None) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        for entry in suite.tasks:
            key = entry.get("run_id") or entry["name"]
            self.rows[key] = {"task": entry["name"], "run": entry.get("run_id"),
                              "state": "failed" if entry.get("error") else "queued", "round": 0,
                              "best_speedup": None, "tokens": 0, "cost_usd": 0.0}
        self.pool: PoolStats | None = None
        self.gate: LLMGate | None = None
        self.on_progress, self.started, self.deadline = on_progress, started, deadline
        self._lock = threading.Lock()

    def update(self, key: str, **values: Any) -> None:
        with self._lock:
            self.rows[key].update(values)
        self.emit()

    def emit(self) -> None:
        if self.on_progress is None:
            return
        with self._lock:
            rows = [dict(r) for r in self.rows.values()]
        now = time.monotonic()
        states = {s: sum(1 for r in rows if r["state"] == s) for s in STATES}
        snap = {"runs": rows, "states": {k: v for k, v in states.items() if v}, "elapsed_s": now - self.started,
                "time_left_s": None if self.deadline is None else max(0.0, self.deadline - now)}
        if self.pool is not None:
            snap["gpu"] = {"slots": self.pool.slots, "running": self.pool.running, "done": self.pool.done,
                           "busy_share": self.pool.busy_share(now)}
        if self.gate is not None:
            snap["llm"] = {"in_flight": self.gate.in_flight, "limit": self.gate.limit,
                           "requests": self.gate.requests, "rate_limited": self.gate.rate_limited}
        try:
            self.on_progress(snap)
        except Exception:  # noqa: BLE001 - a display never stops a suite
            log.exception("progress callback failed")


def drive(suite: Suite, *, options: LoopOptions, make_llm: Callable[[LLMGate], Any], backend: Backend,
          retriever: Any, run_manifest: Callable[[dict[str, Any]], dict[str, Any]],
          drive_options: DriveOptions | None = None, gpu: dict[str, Any] | None = None,
          on_progress: Callable[[dict[str, Any]], None] | None = None) -> SuiteOutcome:
    """Run (or continue) every task of ``suite``; returns when each run has finished, paused or failed.

    ``make_llm(gate)`` gives a fresh LLM client per run (the loop ties it to the run's log);
    ``run_manifest(entry)`` the manifest of a run made now (model, options, harness settings)."""
    opts = drive_options or DriveOptions()
    started = time.monotonic()
    deadline = started + opts.budget_s if opts.budget_s else None
    board = ProgressBoard(suite, on_progress, started, deadline)
    gate = LLMGate(opts.llm_concurrency, deadline=deadline)
    board.gate = gate
    shared_retriever = SerialRetriever(retriever)
    outcomes: dict[str, RunOutcome] = {}
    for entry in suite.tasks:
        if entry.get("error"):
            outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=None, state="failed", error=entry["error"])

    def walk(entry: dict[str, Any]) -> None:
        key = entry["run_id"]
        if deadline is not None and time.monotonic() >= deadline:
            outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=key, state="not started")
            board.update(key, state="not started")
            return
        try:
            run = suite.run_for(entry, run_manifest(entry))
        except (KernelskillError, OSError) as exc:
            outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=key, state="failed", error=str(exc))
            board.update(key, state="failed")
            return

        def progress(p: dict[str, Any]) -> None:
            phase = p.get("phase", "")
            state = "gpu" if phase in _GPU_PHASES else "kb" if phase in _KB_PHASES else "llm"
            board.update(key, state=state, round=p.get("round", 0), best_speedup=p.get("best_speedup"),
                         tokens=p.get("tokens", 0), cost_usd=p.get("cost_usd", 0.0), phase=phase)

        evaluator = SuiteEvaluator(pool, run, lambda s: board.update(key, state=s))
        try:
            loop = Loop(run, make_llm(gate), evaluator, shared_retriever, options.model_copy(deep=True), gpu=gpu,
                        on_progress=progress)
            result = loop.execute()
        except KernelskillError as exc:
            log.warning("%s: %s", run.id, exc)
            _record_error(run, str(exc))
            outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=key, state="failed", error=str(exc))
            board.update(key, state="failed")
            return
        except Exception as exc:  # noqa: BLE001 - one broken run never stops the suite
            log.exception("%s failed", run.id)
            _record_error(run, f"{type(exc).__name__}: {exc}")
            outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=key, state="failed",
                                                 error=f"{type(exc).__name__}: {exc}")
            board.update(key, state="failed")
            return
        state = "finished" if result.status == "finished" else (
            "budget" if (result.paused_before or "").endswith(":budget") else "paused")
        best = (result.best or {}).get("speedup")
        outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=key, state=state, best_speedup=best,
                                             paused_before=result.paused_before)
        board.update(key, state=state, best_speedup=best if best is not None else board.rows[key]["best_speedup"])

    runnable = [e for e in suite.tasks if not e.get("error")]
    with GPUPool(backend, build_jobs=opts.build_jobs, deadline=deadline, retries=opts.worker_retries,
                 on_change=lambda stats: (setattr(board, "pool", stats), board.emit())) as pool:
        board.pool = pool.stats
        board.emit()
        with ThreadPoolExecutor(max_workers=min(opts.max_active, max(1, len(runnable))),
                                thread_name_prefix="ks-run") as runners:
            list(runners.map(walk, runnable))
        stats = pool.stats
    board.emit()
    ordered = [outcomes[e["name"]] for e in suite.tasks if e["name"] in outcomes]
    outcome = SuiteOutcome(runs=ordered, elapsed_s=round(time.monotonic() - started, 3),
                           llm_requests=gate.requests, rate_limited=gate.rate_limited,
                           **pool_outcome(backend, stats))
    record_session(suite, outcome, stats)
    return outcome


def pool_outcome(backend: Backend, stats: PoolStats) -> dict[str, Any]:
    """The GPU side of a suite's outcome: jobs, busy share, retries, and who ran them."""
    return {"gpu_busy_share": stats.busy_share(), "gpu_jobs": stats.done, "gpu_retries": stats.retries,
            "gpu_lost": stats.lost, "evaluator": backend_info(backend)}


def record_session(suite: Suite, outcome: SuiteOutcome, stats: PoolStats) -> None:
    """One line in the suite's ``sessions.jsonl`` per start of its command: who ran the GPU steps, for how long,
    how busy the slots were (what ``benchmarks/scaling.py`` reads). A full disk costs the line, not the suite."""
    span = (stats.last_end - stats.first_start) if stats.first_start is not None and stats.last_end else 0.0
    line = {"ended": utcnow(), "elapsed_s": outcome.elapsed_s, "gpu_jobs": stats.done, "gpu_busy_s": round(stats.busy_s, 3),
            "gpu_span_s": round(span, 3), "gpu_busy_share": outcome.gpu_busy_share, "retries": stats.retries,
            "lost": stats.lost, "refused": stats.refused, **outcome.evaluator}
    try:
        suite.record_session(line)
    except OSError as exc:
        log.warning("%s: the session was not recorded (%s)", suite.path, exc)


def _record_error(run: Run, message: str) -> None:
    """For the report: why this run stopped (no step id: a resumed run walks on as if it were not there).
    Only while holding the run: a run in use by another process is that process's to record."""
    try:
        with run.lock():
            run.log.append("loop", "run_error", {"error": message[:2000]})
    except (KernelskillError, OSError):  # held elsewhere, or a full disk: the suite outcome still says it
        log.warning("%s: the error was not recorded in the run", run.id)
