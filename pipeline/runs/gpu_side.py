"""The GPU side of a split run, for a bare GPU box: ``python -m kernelskill.pipeline.runs.gpu_side DIR``.

Finds every run under DIR (DIR itself, or the run folders in it) that is paused before a GPU step,
evaluates all of those steps with the real harness on this machine (every candidate built first, in
parallel on the CPU, then run one at a time per GPU through :class:`~kernelskill.pipeline.harness.
LocalEvaluator`), profiles the pending profile steps, and appends each result to its run's event log
exactly as the loop would have (:func:`~kernelskill.pipeline.runs.run_gpu_step`) the moment it is
measured, never after the batch: a device call cut off half-way keeps every result measured before the
cut. The planning side's ``kernelskill runs resume`` then finds the steps recorded and goes on as if they
had run there.

``--budget-s`` stops starting work that would end after the budget (the steps left stay pending for the
next trip) and still exports; ``--export-to FILE.tar`` packs every run into ONE file (a bundle of run
archives, ``kernelskill bench import`` / ``runs import`` take it back), ``--export-to FOLDER/`` writes one
archive per run; ``--import`` takes either.

Imports: the standard library, torch (through the harness) and the stdlib-only run store; never
pydantic, click, rich, jinja2, duckdb or the knowledge base, none of which a GPU box needs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import json
import logging
import re
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs import MANIFEST, Run, RunStore, gpu_request, pending_request, run_gpu_step
from kernelskill.pipeline.runs.gpu_pool import NotStarted
from kernelskill.pipeline.runs.gpu_steps import Measured, timed_profile

log = logging.getLogger(__name__)

#: the row status of a step not started because the budget would have been exceeded (it stays pending)
NOT_STARTED = "not started (budget)"
#: how long one evaluation is assumed to take before the first one is measured (for --budget-s)
EVAL_ESTIMATE_S = 30.0


@dataclass
class PendingStep:
    run: Run
    request: dict[str, Any]  # runs.gpu_request(): type, step, task, candidate, seed (run-relative)


def find_runs(root: Path) -> list[Run]:
    """DIR itself when it is a run folder, else the run folders directly inside it."""
    root = Path(root)
    if (root / MANIFEST).is_file():
        return [Run(root)]
    if not root.is_dir():
        raise KernelskillError(f"{root}: no such folder")
    return RunStore(root).list()  # a broken or oddly named run folder is skipped with a warning


def pending_gpu_steps(runs: Iterable[Run]) -> list[PendingStep]:
    """The GPU steps each run is paused before: one, or a search round's whole batch (``request["batch"]``)."""
    out = []
    for run in runs:
        waiting = pending_request(run)
        request = (waiting or {}).get("request")
        if not waiting or waiting.get("side") != "gpu" or not request:
            continue
        for one in request.get("batch") or [request]:
            if run.log.find(one["step"], one["type"]) is None:
                out.append(PendingStep(run, {k: v for k, v in one.items() if k != "batch"}))
    return out


class HarnessGPU:
    """The real harness on this machine; each run's harness settings come from its manifest."""

    def __init__(self, *, allow_cpu: bool = False, build_jobs: int | None = None) -> None:
        self.allow_cpu = allow_cpu
        self.build_jobs = build_jobs
        #: one summary per batch through the pool: evaluations, wall and busy GPU seconds, busy shares
        self.phases: list[dict[str, Any]] = []

    def check(self) -> None:
        try:
            import torch
        except ImportError as exc:  # pragma: no cover
            raise KernelskillError("gpu side: torch is not installed") from exc
        if not torch.cuda.is_available() and not self.allow_cpu:
            raise KernelskillError("gpu side: no CUDA device is visible (--allow-cpu evaluates on the CPU, "
                                   "for testing only: CPU timings are not GPU speedups)")

    @staticmethod
    def config(run_dir: Path, seed: int | None = None) -> Any:
        """The run's EvalConfig: its manifest's harness settings through the harness's one settings mapper
        (the protocol first, then the settings), exactly as the planning side would evaluate."""
        from kernelskill.pipeline.harness.config import eval_config

        try:
            values = dict(json.loads((Path(run_dir) / MANIFEST).read_text()).get("harness") or {})
        except (OSError, json.JSONDecodeError):
            values = {}
        return eval_config(values, seed=seed)

    def evaluate_many(self, steps: Sequence[PendingStep], *,
                      on_result: Callable[[int, dict[str, Any] | None, BaseException | None], None] | None = None,
                      deadline: float | None = None) -> list[dict[str, Any] | None]:
        """Every step through the GPU pool (builds ahead on the CPU, a worker per GPU, each job through the
        harness's ``LocalEvaluator``); ``on_result(i, result, error)`` is called the moment step ``i`` is
        measured (``error`` is :class:`BudgetExceeded` for a step not started before ``deadline``, a
        ``time.monotonic()`` value). Returns the results in order (None where there is none)."""
        from kernelskill.pipeline.runs.gpu_pool import GPUJob, GPUPool, HarnessBackend

        out: list[dict[str, Any] | None] = [None] * len(steps)
        backend = HarnessBackend(self.config)
        started = time.monotonic()
        with GPUPool(backend, build_jobs=self.build_jobs, deadline=deadline,
                     estimates={"eval": EVAL_ESTIMATE_S}) as pool:
            futures = []
            for i, s in enumerate(steps):
                job = GPUJob(kind="eval", task=s.run.path / s.request["task"],
                             candidate=s.run.path / s.request["candidate"], run_dir=s.run.path,
                             seed=s.request.get("seed"), tag=f"{s.run.id}:{s.request['step']}")
                future = pool.submit(job)
                future.add_done_callback(lambda f, i=i: self._done(i, f, out, on_result))
                futures.append(future)
            for future in futures:
                future.exception()  # wait for every job (its callback has run by then)
            stats = pool.stats
        wall = time.monotonic() - started
        share = stats.busy_share()
        phase = {"evaluations": stats.done, "wall_s": round(wall, 1), "gpus": stats.slots,
                 "busy_gpu_s": round(stats.busy_s, 1), "busy_share": None if share is None else round(share, 4),
                 "busy_share_with_builds": round(stats.busy_s / max(wall * stats.slots, 1e-9), 4)}
        self.phases.append(phase)
        log.info("%s", phase_line(phase))
        return out

    @staticmethod
    def _done(i: int, future: Any, out: list[dict[str, Any] | None],
              on_result: Callable[[int, dict[str, Any] | None, BaseException | None], None] | None) -> None:
        error = future.exception()
        out[i] = None if error is not None else future.result()
        if on_result is not None:
            on_result(i, out[i], error)

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        from kernelskill.pipeline.harness import evaluate

        return evaluate(task, candidate, self.config(Path(task).parent, seed)).to_dict()

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        from kernelskill.pipeline.harness import profile

        return profile(task, candidate, self.config(Path(task).parent)).to_dict()

    def seed_compile_baselines(self, runs: Sequence[Run]) -> int:
        """The harness's torch.compile baseline store (empty on a fresh box) from the runs' own records."""
        return seed_compile_baselines(runs, self.config)


def compile_records(runs: Iterable[Run]) -> dict[str, dict[str, Any]]:
    """Every torch.compile baseline record in the runs' eval events (``details.timing.compile.measured``), by
    key. The events are written by the parent process only (never by a worker), so they are trusted."""
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        for event in run.log.of_type("eval"):
            result = (event.get("data") or {}).get("result") or {}
            timing = (result.get("details") or {}).get("timing") or {}
            measured = (timing.get("compile") or {}).get("measured") if isinstance(timing, dict) else None
            if isinstance(measured, dict) and isinstance(measured.get("key"), str):
                found.setdefault(measured["key"], measured)
    return found


def _run_seeds(run: Run) -> set[int | None]:
    """The seeds a run evaluates with: its own (None), its events' and its pending steps'."""
    seeds: set[int | None] = {None}
    seeds.update((e.get("data") or {}).get("seed") for e in run.log.of_type("eval"))
    seeds.update(s.request.get("seed") for s in pending_gpu_steps([run]))
    return {s for s in seeds if s is None or isinstance(s, int)}


def seed_compile_baselines(runs: Sequence[Run], config: Callable[[Path, int | None], Any]) -> int:
    """Seed the harness's torch.compile baseline store (empty on a fresh GPU box) from the records the runs
    carry: a record is stored only where its key is the one the harness computes here and now for that run's
    task and settings (another GPU, torch or triton gives another key: the baseline is measured again).
    ``config(run_dir, seed)`` is the run's EvalConfig (:meth:`HarnessGPU.config`). Returns how many records
    were stored."""
    from kernelskill.pipeline.harness import seed_compile_baselines as seed

    records = list(compile_records(runs).values())
    written = 0
    if not records:
        return 0
    for run in runs:
        for run_seed in _run_seeds(run):
            try:
                written += seed(run.task_path, config(run.path, run_seed), records)
            except Exception as exc:  # noqa: BLE001 - a record not seeded is measured again, nothing worse
                log.warning("%s: compile baselines not seeded: %s: %s", run.id, type(exc).__name__, exc)
    return written


#: what a profile step skipped on purpose records (the loop then queries from the code and the measurements)
SKIPPED_PROFILE = ("not profiled: the GPU side was told to skip profiles (--skip-profiles); the query reads the "
                   "code and the measurements only")


class SkipProfiles:
    """An evaluator whose evaluations go through to ``inner`` and whose profiles are recorded as not taken:
    for a trip that has device time for the evaluations only, or a box where Nsight Compute may not read the
    counters. A profile is optional to the loop: its next query is static-only, and says so."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # evaluate, evaluate_many, phases, check: the inner evaluator's
        return getattr(self.inner, name)

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        from kernelskill.pipeline.harness.results import ProfileResult

        return ProfileResult(ok=False, message=SKIPPED_PROFILE).to_dict()


def phase_line(phase: dict[str, Any]) -> str:
    """One line for a batch's summary (:attr:`HarnessGPU.phases`)."""
    share = phase["busy_share"]
    return (f"GPU phase: {phase['evaluations']} evaluations in {phase['wall_s']:.0f} s on {phase['gpus']} GPU(s), "
            f"{phase['busy_gpu_s']:.0f} GPU-s busy: busy share {'-' if share is None else f'{share:.0%}'} from the "
            f"first start, {phase['busy_share_with_builds']:.0%} of the whole batch (its first builds included)")


def _row(step: PendingStep, event: dict[str, Any] | None, error: str = "") -> dict[str, Any]:
    data = (event or {}).get("data", {})
    result = data.get("result") or {}
    status = error or (result.get("status") if step.request["type"] == "eval" else
                       ("profiled" if data.get("ok") else f"no profile: {textwrap.shorten(str(data.get('message', '')), 120, placeholder=' ...')}"))
    return {"run": step.run.id, "step": step.request["step"], "type": step.request["type"],
            "candidate": step.request["candidate"], "status": status, "speedup": result.get("speedup"),
            "candidate_ms": result.get("candidate_ms"), "baseline_ms": result.get("baseline_ms")}


_ROUND = re.compile(r"^r(\d+)\.")


def _last_round(run: Run) -> int | None:
    rounds = (run.manifest.get("options") or {}).get("rounds")
    return rounds if isinstance(rounds, int) else None


def _round_of(step: str) -> int | None:
    match = _ROUND.match(step)
    return int(match.group(1)) if match else None


def _search_frontier(run: Run) -> int:
    """F of a search run (several candidates per round, or a frontier of several); 0 for a single path."""
    options = run.manifest.get("options") or {}
    k, f = options.get("candidates_per_round") or 1, options.get("frontier") or 1
    return int(f) if isinstance(k, int) and isinstance(f, int) and (k > 1 or f > 1) else 0


def profile_ahead_request(run: Run, request: dict[str, Any], event: dict[str, Any]) -> dict[str, Any] | None:
    """The profile step the loop will ask for next when this evaluated candidate becomes a parent, so that
    one trip to the GPU box serves the evaluation and the profile. A single path plans from a candidate that
    is correct and faster than every one accepted so far; a search plans from each member of its frontier,
    the F fastest correct candidates, so a candidate that ranks among them as it is recorded is profiled
    (one pushed out later by a faster one of the same batch costs a profile the loop does not ask for; one
    that is missed would cost a trip). None when the loop is unlikely to ask for it."""
    result = (event.get("data") or {}).get("result") or {}
    if request["type"] != "eval" or request["step"].startswith("verify.") or not result.get("correct"):
        return None
    if _round_of(request["step"]) == _last_round(run):
        return None  # no round follows the last one: nothing will plan from this profile
    speed = result.get("speedup")
    frontier = _search_frontier(run)
    if frontier:
        speeds = sorted((((e.get("data") or {}).get("result") or {}).get("speedup") or 0.0
                         for e in run.log.of_type("eval") if not str(e.get("step", "")).startswith("verify.")
                         and ((e.get("data") or {}).get("result") or {}).get("correct")), reverse=True)
        if len(speeds) > frontier and not (isinstance(speed, int | float) and speed >= speeds[frontier - 1]):
            return None
    else:
        best = max((e["data"].get("speedup") or 0.0 for e in run.log.of_type("attempt")
                    if e["data"].get("accepted")), default=None)
        if best is not None and not (isinstance(speed, int | float) and speed > best):
            return None
    profile = gpu_request("profile", f"profile.{Path(request['candidate']).stem}", request["candidate"])
    return None if run.log.find(profile["step"], "profile") is not None else profile


def verify_ahead_requests(run: Run) -> list[dict[str, Any]]:
    """The final re-verification the loop will ask for next when the run's last round has just been
    measured correct: an evaluation of its fastest correct candidate that the loop has not turned down, on
    the run's verify seed, so that the last trip to the GPU box also serves the end of the run. When that
    candidate has not been reviewed yet (the last round's own, measured on this trip), the runner-up is
    verified too: the loop verifies it if the review turns the fastest down, and nothing on the box can know
    which. Empty when the run has more rounds to go, when the last round failed (a repair comes next) or
    when what it would verify is recorded already. Should the loop rank another candidate first, it simply
    asks for that one."""
    rounds, seed = _last_round(run), (run.manifest.get("options") or {}).get("verify_seed")
    if rounds is None or seed is None:
        return []
    evals = [e for e in run.log.of_type("eval") if e.get("kind", "gpu") == "gpu"
             and not str(e.get("step", "")).startswith("verify.")]
    last = [e for e in evals if _round_of(str(e.get("step", ""))) == rounds]
    if not last or not any(((e.get("data") or {}).get("result") or {}).get("correct") for e in last):
        return []
    attempts = run.log.of_type("attempt")
    reviewed = {(e.get("data") or {}).get("candidate") for e in attempts}
    # a candidate the loop already turned down (slower, or a gain inside the noise) is not what it will verify
    turned_down = {(e.get("data") or {}).get("candidate") for e in attempts if not (e.get("data") or {}).get("accepted")}
    correct = [e for e in evals if ((e.get("data") or {}).get("result") or {}).get("correct")
               and (e.get("data") or {}).get("candidate") not in turned_down]
    ranked = sorted(correct, key=lambda e: e["data"]["result"].get("speedup") or 0.0, reverse=True)
    chosen: list[str] = []
    for event in ranked:
        candidate = event["data"]["candidate"]
        if candidate not in chosen:
            chosen.append(candidate)
        if candidate in reviewed or len(chosen) == 2:
            break
    requests = [gpu_request("eval", f"verify.{Path(c).stem}", c, seed=seed) for c in chosen]
    return [r for r in requests if run.log.find(r["step"], "eval") is None]


def job_key(step: PendingStep) -> str:
    """What makes two GPU steps the same measurement: the step type, the task's and the candidate's bytes,
    the seed and the run's harness settings. Steps of different runs with one key are measured once (the
    seed of an ablation arm is the same file as its knowledge arm's) and the result is recorded in each."""
    digest = hashlib.sha256()
    for part in (step.request["type"], str(step.request.get("seed"))):
        digest.update(part.encode() + b"\0")
    for rel in (step.request["task"], step.request["candidate"]):
        try:
            digest.update((step.run.path / rel).read_bytes() + b"\0")
        except OSError:
            digest.update(f"{step.run.path / rel}\0".encode())  # unreadable: never shared
    digest.update(json.dumps(step.run.manifest.get("harness") or {}, sort_keys=True, default=str).encode())
    return digest.hexdigest()


class _Shared:
    """The evaluator, with one measurement per :func:`job_key` within a call of :func:`evaluate_pending`."""

    def __init__(self, evaluator: Any) -> None:
        self.evaluator = evaluator
        self.done: dict[str, dict[str, Any]] = {}

    def bind(self, step: PendingStep) -> _SharedJob:
        return _SharedJob(self, job_key(step))


class _SharedJob:
    """One step's view of :class:`_Shared` (the seam :func:`run_gpu_step` calls): measures on first use."""

    def __init__(self, shared: _Shared, key: str) -> None:
        self.shared, self.key = shared, key

    def _once(self, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if self.key not in self.shared.done:
            self.shared.done[self.key] = measure()
        return self.shared.done[self.key]

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        evaluator = self.shared.evaluator
        return self._once(lambda: evaluator.evaluate(task, candidate) if seed is None
                          else evaluator.evaluate(task, candidate, seed=seed))

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        # timed here, once: every run that records this profile is charged the seconds it took
        return self._once(lambda: timed_profile(self.shared.evaluator, task, candidate))


def _accepts(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin
        return False


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def evaluate_pending(runs: Iterable[Run], evaluator: Any = None, *, profile_ahead: bool = False,
                     verify_ahead: bool = False, deadline: float | None = None,
                     progress: Callable[[str, int | None, int | None], None] | None = None) -> list[dict[str, Any]]:
    """Evaluate and record the pending GPU step of every run; one row per step.

    ``evaluator`` offers ``evaluate(task, candidate, *, seed)`` and ``profile(task, candidate)``
    (dicts, like the loop's seam); with ``evaluate_many(steps)`` too, all evaluations go as one batch
    (with ``evaluate_many(steps, *, on_result, deadline)``, each result is recorded the moment it is
    measured; otherwise as soon as the batch returns). ``profile_ahead`` also profiles each evaluated
    candidate that would become the parent (:func:`profile_ahead_request`): the loop then finds its next
    GPU step recorded already; ``verify_ahead`` likewise re-verifies the fastest candidate of each run whose
    last round was just measured correct (:func:`verify_ahead_requests`). ``deadline`` (a
    ``time.monotonic()`` value): no step is started after it (nor, in a batch, one that would end after it);
    those stay pending, with the row status ``not started (budget)``. Identical jobs (:func:`job_key`) are
    measured once and recorded in each run. A run held by another process is skipped; a step that fails to run is reported and stays
    pending. ``progress(message, done, total)`` is called as each step is recorded (the CLI shows it)."""
    evaluator = evaluator if evaluator is not None else HarnessGPU()
    rows: list[dict[str, Any]] = []
    lock = threading.Lock()
    with contextlib.ExitStack() as stack:
        steps = []
        locked: dict[str, bool] = {}  # a run paused before a search round's batch holds several steps: one lock
        for step in pending_gpu_steps(runs):
            key = str(step.run.path)  # two suites' runs can share an id
            if key not in locked:
                try:
                    stack.enter_context(step.run.lock())
                    locked[key] = True
                except KernelskillError as exc:
                    locked[key] = False
                    rows.append(_row(step, None, error=f"skipped: {exc}"))
                    continue
            if not locked[key]:
                rows.append(_row(step, None, error="skipped: the run is held by another process"))
                continue
            steps.append(step)
        evals = [s for s in steps if s.request["type"] == "eval"]
        if progress is not None and steps:
            progress(f"{len(steps)} pending GPU steps ({len(evals)} evaluations: all built first, in parallel)",
                     None, None)
        handled: set[int] = set()
        ahead: list[PendingStep] = []

        def record(step: PendingStep, source: Any, label: str | None = None) -> None:
            """Record one step now (the log is fsync'd per event): a kill loses nothing measured."""
            try:
                event = run_gpu_step(step.run, step.request, source)
                row = _row(step, event) | ({"type": label} if label else {})
                follow = profile_ahead_request(step.run, step.request, event) if profile_ahead else None
            except Exception as exc:  # noqa: BLE001 - one broken step never stops the others
                log.warning("%s %s: %s", step.run.id, step.request["step"], exc)
                row, follow = _row(step, None, error=f"error: {type(exc).__name__}: {exc}"), None
            with lock:
                rows.append(row)
                if follow is not None:
                    ahead.append(PendingStep(step.run, follow))
                if progress is not None:
                    progress(f"{step.run.id} {step.request['step']}: {row['status']}", len(rows), len(steps))

        def run_batch(batch: list[PendingStep], label: str | None = None) -> None:
            """Every eval of ``batch`` through the evaluator's batch entry point (builds in parallel, a worker
            per GPU), identical jobs once; each recorded the moment it is measured."""
            if not batch or not hasattr(evaluator, "evaluate_many"):
                return
            streaming = _accepts(evaluator.evaluate_many, "on_result")
            groups: dict[str, list[PendingStep]] = {}  # identical jobs (an arm and its ablation's seed) run once
            for step in batch:
                groups.setdefault(job_key(step), []).append(step)
            same = list(groups.values())
            unique = [group[0] for group in same]

            def measured(j: int, result: dict[str, Any] | None, error: BaseException | None) -> None:
                for step in same[j]:
                    handled.add(id(step))
                    if error is not None:
                        with lock:
                            rows.append(_row(step, None, error=NOT_STARTED if _budget(error) else
                                             f"error: {type(error).__name__}: {error}"))
                    else:
                        record(step, Measured(result or {}), label)

            try:
                if streaming:
                    evaluator.evaluate_many(unique, on_result=measured, deadline=deadline)
                else:
                    results = evaluator.evaluate_many(unique)
                    for j, result in enumerate(results):
                        measured(j, result, None)
                log.info("evaluated %d pending candidates in one batch (%d identical jobs shared)",
                         len(unique), len(batch) - len(unique))
            except Exception as exc:  # noqa: BLE001 - the batch failed as a whole: one at a time instead
                log.warning("the batch of %d evaluations failed (%s); evaluating the rest one at a time",
                            len(unique), exc)

        run_batch(evals)
        shared = _Shared(evaluator)
        for step in [s for s in evals if id(s) not in handled] + [s for s in steps if s.request["type"] != "eval"]:
            if _past(deadline):
                rows.append(_row(step, None, error=NOT_STARTED))
                continue
            record(step, shared.bind(step))
        if verify_ahead:
            touched = {id(s.run): s.run for s in steps if s.request["type"] == "eval"}
            for run in touched.values():
                ahead.extend(PendingStep(run, request) for request in verify_ahead_requests(run))
        if not _past(deadline):  # re-verifications ahead: one more batch (their builds in parallel too)
            run_batch([s for s in ahead if s.request["type"] == "eval"], "eval ahead")
        for step in [s for s in ahead if id(s) not in handled]:
            if _past(deadline):
                break  # a step ahead is optional: the loop asks for it again
            try:
                rows.append(_row(step, run_gpu_step(step.run, step.request, shared.bind(step)))
                            | {"type": f"{step.request['type']} ahead"})
            except Exception as exc:  # noqa: BLE001 - a profile ahead is optional: the loop asks again
                log.warning("%s %s (ahead): %s", step.run.id, step.request["step"], exc)
    return rows


def _budget(error: BaseException) -> bool:
    return isinstance(error, NotStarted)  # past the budget, or the pool was left (a signal): still pending


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A plain-text table (no rich on the GPU box)."""
    if not rows:
        return "no pending GPU steps"
    head = ("run", "step", "type", "candidate", "status", "speedup", "candidate ms", "eager ms")
    keys = ("run", "step", "type", "candidate", "status", "speedup", "candidate_ms", "baseline_ms")

    def cell(v: Any) -> str:
        return "-" if v is None or v == "" else f"{v:.3f}" if isinstance(v, float) else str(v)

    body = [[cell(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelskill.pipeline.runs.gpu_side",
                                     description="Evaluate the pending GPU steps of every run under DIR.")
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="a runs folder or a run folder")
    parser.add_argument("--allow-cpu", action="store_true", help="evaluate without CUDA (tests only)")
    parser.add_argument("--build-jobs", type=int, default=None, help="parallel builds (default: 3/4 of cores)")
    parser.add_argument("--dry-run", action="store_true", help="list the pending steps, evaluate nothing")
    parser.add_argument("--no-verify-ahead", action="store_true",
                        help="do not re-verify a run's fastest candidate when its last round was just measured "
                             "correct (the loop then asks for it on the next trip)")
    parser.add_argument("--no-profile-ahead", action="store_true",
                        help="do not profile a candidate that would become the parent (saves ncu time, costs a trip)")
    parser.add_argument("--skip-profiles", action="store_true",
                        help="record every pending profile step as not taken (no ncu; the loop plans from the code "
                             "and the measurements) and profile nothing ahead; needs no CUDA when only profiles "
                             "are pending")
    parser.add_argument("--import", dest="archives", nargs="+", type=Path, default=[], metavar="ARCHIVE",
                        help="unpack these run archives (kernelskill runs export) or bundles (kernelskill bench "
                             "export, FILE.tar) into DIR first; with several DIRs, one bundle per DIR, in order "
                             "(two suites evaluated in one batch)")
    parser.add_argument("--export-to", dest="exports", nargs="+", type=Path, default=[], metavar="FILE.tar|FOLDER",
                        help="afterwards (also when stopped by the budget) write every run under DIR back: into "
                             "ONE file when it ends in .tar, else one archive per run into FOLDER; with several "
                             "DIRs, one FILE.tar per DIR, in order")
    parser.add_argument("--budget-s", type=float, default=None, metavar="S",
                        help="start no evaluation that would end later than S seconds after the start; the "
                             "steps left stay pending for the next trip")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    args = parser.parse_args(argv)
    previous = None
    if threading.current_thread() is threading.main_thread():
        # a SIGTERM (`timeout`, a scheduler) stops the batch and still exports what was recorded (the finally
        # below); queued steps stay pending. SIGKILL cannot be caught: every result is already in its run.
        previous = signal.signal(signal.SIGTERM, _terminated)
    started = time.monotonic()
    deadline = started + args.budget_s if args.budget_s else None
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    from kernelskill.pipeline.runs.portable import (
        ARCHIVE_SUFFIX,
        BUNDLE_SUFFIX,
        export_run,
        export_runs,
        import_run,
        import_runs,
        is_bundle,
    )

    rows: list[dict[str, Any]] = []
    runs: list[Run] = []
    by_dir: list[list[Run]] = []  # the runs found under each DIR, in order
    try:
        if len(args.dirs) > 1 and args.archives and len(args.archives) != len(args.dirs):
            raise KernelskillError(f"--import: {len(args.dirs)} DIRs need one bundle each, in order "
                                   f"(got {len(args.archives)})")
        if len(args.exports) not in (0, 1, len(args.dirs)) or (len(args.dirs) > 1 and len(args.exports) == 1):
            raise KernelskillError(f"--export-to: {len(args.dirs)} DIRs need one FILE.tar each, in order")
        for i, archive in enumerate(args.archives):
            into = args.dirs[i] if len(args.dirs) > 1 else args.dirs[0]
            if is_bundle(archive):
                import_runs(archive, into, replace=True, require=(MANIFEST,))
            else:
                import_run(archive, into, replace=True, require=(MANIFEST,))
        by_dir = [find_runs(d) for d in args.dirs]
        runs = [run for found in by_dir for run in found]
        if args.dry_run:
            rows = [_row(s, None, error="pending") for s in pending_gpu_steps(runs)]
        else:
            gpu = HarnessGPU(allow_cpu=args.allow_cpu, build_jobs=args.build_jobs)
            if not (args.skip_profiles and all(s.request["type"] == "profile" for s in pending_gpu_steps(runs))):
                gpu.check()
            evaluator = SkipProfiles(gpu) if args.skip_profiles else gpu

            def progress(message: str, done: int | None, total: int | None) -> None:  # one line each, stderr
                count = f" [{done}/{total}]" if done is not None and total else ""
                print(f"gpu side ({time.monotonic() - started:.0f} s): {message}{count}", file=sys.stderr, flush=True)

            progress(f"{len(runs)} runs under {', '.join(map(str, args.dirs))}", None, None)
            seeder = getattr(gpu, "seed_compile_baselines", None)  # a stand-in evaluator may have no store
            seeded = seeder(runs) if seeder is not None else 0
            if seeded:
                progress(f"{seeded} torch.compile baselines taken from the runs' records", None, None)
            try:
                rows = evaluate_pending(runs, evaluator,
                                        profile_ahead=not (args.no_profile_ahead or args.skip_profiles),
                                        verify_ahead=not args.no_verify_ahead, deadline=deadline,
                                        progress=progress)
            finally:
                for phase in getattr(gpu, "phases", []):  # a stand-in evaluator may keep none
                    progress(phase_line(phase), None, None)
    except KernelskillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    finally:  # what was measured travels back even when the evaluation stopped half-way
        if previous is not None:  # a second SIGTERM must not cut the export short: it is what the trip is for
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if len(args.exports) == 1:  # every run into one place
            pairs = [(args.exports[0], runs)]
        else:  # one place per DIR, in order (none when nothing is to be exported)
            pairs = list(zip(args.exports, by_dir, strict=False))
        for target, some in pairs:
            if not some:
                continue
            try:
                if target.suffix == BUNDLE_SUFFIX:
                    _, problems = export_runs([r.path for r in some], target)
                    for problem in problems:
                        print(f"error: not exported: {problem}", file=sys.stderr)
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    for run in some:
                        export_run(run.path, target / f"{run.id}{ARCHIVE_SUFFIX}")
            except KernelskillError as exc:
                print(f"error: export: {exc}", file=sys.stderr)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 1 if any(str(r["status"]).startswith("error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
