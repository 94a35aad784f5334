"""The GPU side of a split run, for a bare GPU box: ``python -m kernelskill.pipeline.runs.gpu_side DIR``.

Finds every run under DIR (DIR itself, or the run folders in it) that is paused before a GPU step,
evaluates all of those steps with the real harness on this machine (every candidate built first, in
parallel on the CPU, then run one at a time per GPU through :class:`~kernelskill.pipeline.harness.
LocalEvaluator`), profiles the pending profile steps, and appends each result to its run's event log
exactly as the loop would have (:func:`~kernelskill.pipeline.runs.run_gpu_step`). The planning side's
``kernelskill runs resume`` then finds the steps recorded and goes on as if they had run there.

Imports: the standard library, torch (through the harness) and the stdlib-only run store; never
pydantic, click, rich, jinja2, duckdb or the knowledge base, none of which a GPU box needs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs import MANIFEST, Run, gpu_request, pending_request, run_gpu_step

log = logging.getLogger(__name__)


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
    return [Run(p) for p in sorted(root.iterdir()) if (p / MANIFEST).is_file()]


def pending_gpu_steps(runs: Iterable[Run]) -> list[PendingStep]:
    """The GPU step each run is paused before (a run waits for at most one step at a time)."""
    out = []
    for run in runs:
        waiting = pending_request(run)
        request = (waiting or {}).get("request")
        if not waiting or waiting.get("side") != "gpu" or not request:
            continue
        if run.log.find(request["step"], request["type"]) is None:
            out.append(PendingStep(run, request))
    return out


class HarnessGPU:
    """The real harness on this machine; each run's harness settings come from its manifest."""

    def __init__(self, *, allow_cpu: bool = False, build_jobs: int | None = None) -> None:
        self.allow_cpu = allow_cpu
        self.build_jobs = build_jobs

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
        from kernelskill.pipeline.harness import EvalConfig

        try:
            values = dict(json.loads((Path(run_dir) / MANIFEST).read_text()).get("harness") or {})
        except (OSError, json.JSONDecodeError):
            values = {}
        if seed is not None:
            values["seed"] = seed
        names = {f.name for f in dataclasses.fields(EvalConfig)}
        return EvalConfig(**{k: v for k, v in values.items() if k in names})

    def evaluate_many(self, steps: Sequence[PendingStep]) -> list[dict[str, Any]]:
        from kernelskill.pipeline.harness import EvalJob, LocalEvaluator

        jobs = [EvalJob(task=str(s.run.path / s.request["task"]), candidate=str(s.run.path / s.request["candidate"]),
                        config=self.config(s.run.path, s.request.get("seed")), tag=f"{s.run.id}:{s.request['step']}")
                for s in steps]
        results = LocalEvaluator(build_jobs=self.build_jobs).submit(jobs)
        return [r.to_dict() for r in results]

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        from kernelskill.pipeline.harness import evaluate

        return evaluate(task, candidate, self.config(Path(task).parent, seed)).to_dict()

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        from kernelskill.pipeline.harness import profile

        return profile(task, candidate, self.config(Path(task).parent)).to_dict()


class _Measured:
    """Hands a result measured in a batch to :func:`run_gpu_step`, which records it as the loop does."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        return self.result

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:  # pragma: no cover - evals only
        return self.result


def _row(step: PendingStep, event: dict[str, Any] | None, error: str = "") -> dict[str, Any]:
    data = (event or {}).get("data", {})
    result = data.get("result") or {}
    status = error or (result.get("status") if step.request["type"] == "eval" else
                       ("profiled" if data.get("ok") else f"no profile: {data.get('message', '')[:80]}"))
    return {"run": step.run.id, "step": step.request["step"], "type": step.request["type"],
            "candidate": step.request["candidate"], "status": status, "speedup": result.get("speedup"),
            "candidate_ms": result.get("candidate_ms"), "baseline_ms": result.get("baseline_ms")}


def profile_ahead_request(run: Run, request: dict[str, Any], event: dict[str, Any]) -> dict[str, Any] | None:
    """The profile step the loop will ask for next when this evaluated candidate becomes the parent
    (correct, and faster than every candidate accepted so far), so that one trip to the GPU box serves
    the evaluation and the profile. None when the loop is unlikely to ask for it."""
    result = (event.get("data") or {}).get("result") or {}
    if request["type"] != "eval" or request["step"].startswith("verify.") or not result.get("correct"):
        return None
    speed = result.get("speedup")
    best = max((e["data"].get("speedup") or 0.0 for e in run.log.of_type("attempt") if e["data"].get("accepted")),
               default=None)
    if best is not None and not (isinstance(speed, int | float) and speed > best):
        return None
    profile = gpu_request("profile", f"profile.{Path(request['candidate']).stem}", request["candidate"])
    return None if run.log.find(profile["step"], "profile") is not None else profile


def evaluate_pending(runs: Iterable[Run], evaluator: Any = None, *, profile_ahead: bool = False
                     ) -> list[dict[str, Any]]:
    """Evaluate and record the pending GPU step of every run; one row per step.

    ``evaluator`` offers ``evaluate(task, candidate, *, seed)`` and ``profile(task, candidate)``
    (dicts, like the loop's seam); with ``evaluate_many(steps)`` too, all evaluations go as one batch.
    ``profile_ahead`` also profiles each evaluated candidate that would become the parent
    (:func:`profile_ahead_request`): the loop then finds its next GPU step recorded already.
    A run held by another process is skipped; a step that fails to run is reported and stays pending."""
    evaluator = evaluator if evaluator is not None else HarnessGPU()
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        steps = []
        for step in pending_gpu_steps(runs):
            try:
                stack.enter_context(step.run.lock())
            except KernelskillError as exc:
                rows.append(_row(step, None, error=f"skipped: {exc}"))
                continue
            steps.append(step)
        evals = [s for s in steps if s.request["type"] == "eval"]
        batch: list[dict[str, Any]] | None = None
        if evals and hasattr(evaluator, "evaluate_many"):
            try:
                batch = evaluator.evaluate_many(evals)
                log.info("evaluated %d pending candidates in one batch", len(evals))
            except Exception as exc:  # noqa: BLE001 - the batch failed as a whole: one at a time instead
                log.warning("the batch of %d evaluations failed (%s); evaluating one at a time", len(evals), exc)
        measured = dict(zip((id(s) for s in evals), batch, strict=True)) if batch is not None else {}
        ahead: list[PendingStep] = []
        for step in evals + [s for s in steps if s.request["type"] != "eval"]:
            try:
                source = _Measured(measured[id(step)]) if id(step) in measured else evaluator
                event = run_gpu_step(step.run, step.request, source)
                rows.append(_row(step, event))
                follow = profile_ahead_request(step.run, step.request, event) if profile_ahead else None
                if follow is not None:
                    ahead.append(PendingStep(step.run, follow))
            except Exception as exc:  # noqa: BLE001 - one broken step never stops the others
                log.warning("%s %s: %s", step.run.id, step.request["step"], exc)
                rows.append(_row(step, None, error=f"error: {type(exc).__name__}: {exc}"))
        for step in ahead:
            try:
                rows.append(_row(step, run_gpu_step(step.run, step.request, evaluator)) | {"type": "profile ahead"})
            except Exception as exc:  # noqa: BLE001 - a profile ahead is optional: the loop asks again
                log.warning("%s %s (ahead): %s", step.run.id, step.request["step"], exc)
    return rows


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelskill.pipeline.runs.gpu_side",
                                     description="Evaluate the pending GPU steps of every run under DIR.")
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="a runs folder or a run folder")
    parser.add_argument("--allow-cpu", action="store_true", help="evaluate without CUDA (tests only)")
    parser.add_argument("--build-jobs", type=int, default=None, help="parallel builds (default: 3/4 of cores)")
    parser.add_argument("--dry-run", action="store_true", help="list the pending steps, evaluate nothing")
    parser.add_argument("--no-profile-ahead", action="store_true",
                        help="do not profile a candidate that would become the parent (saves ncu time, costs a trip)")
    parser.add_argument("--import", dest="archives", nargs="+", type=Path, default=[], metavar="ARCHIVE",
                        help="unpack these run archives (kernelskill runs export) into DIR first")
    parser.add_argument("--export-to", type=Path, default=None, metavar="FOLDER",
                        help="afterwards write every run under DIR back as one archive each into FOLDER")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    from kernelskill.pipeline.runs.portable import ARCHIVE_SUFFIX, export_run, import_run

    try:
        if args.archives and len(args.dirs) != 1:
            raise KernelskillError("--import needs exactly one DIR to unpack into")
        for archive in args.archives:
            import_run(archive, args.dirs[0], replace=True, require=(MANIFEST,))
        runs = [run for d in args.dirs for run in find_runs(d)]
        if args.dry_run:
            rows = [_row(s, None, error="pending") for s in pending_gpu_steps(runs)]
        else:
            gpu = HarnessGPU(allow_cpu=args.allow_cpu, build_jobs=args.build_jobs)
            gpu.check()
            rows = evaluate_pending(runs, gpu, profile_ahead=not args.no_profile_ahead)
        if args.export_to is not None:
            args.export_to.mkdir(parents=True, exist_ok=True)
            for run in runs:
                export_run(run.path, args.export_to / f"{run.id}{ARCHIVE_SUFFIX}")
    except KernelskillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 1 if any(str(r["status"]).startswith("error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
