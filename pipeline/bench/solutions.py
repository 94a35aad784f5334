"""``bench eval``: existing solutions (KernelBench's generated ``level_N_problem_P_sample_S_kernel.py``)
measured with the project's harness, one run folder per solution, all through one GPU pool.

Each run holds the task, the solution as ``candidates/solution.py`` and one GPU step, ``solution.eval``,
recorded the moment it is measured; a suite started again skips every solution already measured.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.bench.driver import (
    DriveOptions,
    ProgressBoard,
    RunOutcome,
    SuiteEvaluator,
    SuiteOutcome,
    pool_outcome,
    record_session,
)
from kernelskill.pipeline.bench.suite import Suite
from kernelskill.pipeline.runs import Paused, gpu_request, run_gpu_step
from kernelskill.pipeline.runs.gpu_pool import Backend, GPUPool

log = logging.getLogger(__name__)

SOLUTION_STEP = "solution.eval"
SOLUTION_FILE = "solution"


def evaluate_solutions(suite: Suite, *, backend: Backend, run_manifest: Callable[[dict[str, Any]], dict[str, Any]],
                       drive_options: DriveOptions | None = None,
                       on_progress: Callable[[dict[str, Any]], None] | None = None) -> SuiteOutcome:
    opts = drive_options or DriveOptions()
    started = time.monotonic()
    deadline = started + opts.budget_s if opts.budget_s else None
    board = ProgressBoard(suite, on_progress, started, deadline)
    outcomes: dict[str, RunOutcome] = {e["name"]: RunOutcome(task=e["name"], run_id=None, state="failed",
                                                             error=e["error"]) for e in suite.tasks if e.get("error")}

    def one(entry: dict[str, Any]) -> None:
        key = entry["run_id"]
        try:
            run = suite.run_for(entry, run_manifest(entry))
            rel = f"candidates/{SOLUTION_FILE}.py"
            if not (run.path / rel).is_file():
                rel = run.write_candidate(SOLUTION_FILE, Path(entry["solution"]).read_text(encoding="utf-8"))
            event = run_gpu_step(run, gpu_request("eval", SOLUTION_STEP, rel), SuiteEvaluator(
                pool, run, lambda s: board.update(key, state=s)), round_=0)
        except Paused:
            outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=key, state="budget")
            board.update(key, state="budget")
            return
        except (KernelskillError, OSError, UnicodeDecodeError) as exc:
            outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=key, state="failed", error=str(exc))
            board.update(key, state="failed")
            return
        result = event["data"].get("result") or {}
        speed = result.get("speedup") if result.get("correct") else None
        outcomes[entry["name"]] = RunOutcome(task=entry["name"], run_id=key, state="finished", best_speedup=speed)
        board.update(key, state="finished", best_speedup=speed)

    runnable = [e for e in suite.tasks if not e.get("error")]
    with GPUPool(backend, build_jobs=opts.build_jobs, deadline=deadline, retries=opts.worker_retries,
                 on_change=lambda stats: (setattr(board, "pool", stats), board.emit())) as pool:
        board.pool = pool.stats
        with ThreadPoolExecutor(max_workers=min(opts.max_active, max(1, len(runnable))),
                                thread_name_prefix="ks-sol") as runners:
            list(runners.map(one, runnable))
        stats = pool.stats
    board.emit()
    outcome = SuiteOutcome(runs=[outcomes[e["name"]] for e in suite.tasks if e["name"] in outcomes],
                           elapsed_s=round(time.monotonic() - started, 3), **pool_outcome(backend, stats))
    record_session(suite, outcome, stats)
    return outcome
