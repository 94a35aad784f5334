"""Runs: everything about one optimize run as a portable folder, and moving it between machines.

Owns the run folder and its event log (``events``, ``store``), GPU steps as portable requests
(``gpu_steps``), DuckDB views over the log (``views``), reports (``report``, ``html``), the GPU pool that
serves the GPU steps of many runs with a worker per GPU (``gpu_pool``), the file hand-off of LLM steps
(``exchange``), archives (``portable``) and the GPU-side command (``gpu_side``). Standard library only,
except ``views`` (duckdb, imported lazily) and the harness that ``gpu_side`` and ``gpu_pool`` load on the GPU box.


Layout of a run folder (every path stored inside it is relative to the folder)::

    run.json            the manifest: id, task file, loop options, model, created (written once)
    task.py             a copy of the task, so the folder needs nothing outside itself
    candidates/         every candidate source the loop produced, ``<step>.py``
    events.jsonl        the append-only event log: the resume point and the analysis database
    best.py             the best verified ModelNew (KernelBench-compatible), when the run ends
    trajectory.json     one row per candidate, when the run ends
    report.md           the markdown report, when the run ends

Each line of ``events.jsonl`` is one event::

    {"seq": 7, "ts": "...Z", "kind": "llm" | "gpu" | "kb" | "loop", "type": "...",
     "step": "r03.plan.1", "round": 3, "data": {...}}

``kind`` says which side of a split run produced the event: ``llm`` (an LLM request and its
answer), ``kb`` (a knowledge-base query), ``gpu`` (an evaluation or a profile) or ``loop``
(decisions the loop took from the others, cheap to recompute). A step whose event is in the log
is never executed again. Lines are written with one ``write`` and fsync'd; a line cut short by a
kill is ignored on read and removed before the next append.

No absolute path, host name or credential is written into the folder: the writer replaces the
run folder's absolute path (and the user's home) in every string it stores.
"""

from __future__ import annotations

from .events import (
           CANDIDATES,
           EVENTS,
           LOCK,
           MANIFEST,
           SIDE,
           STEP_KINDS,
           TASK,
           EventLog,
           Paused,
           new_run_id,
           step_filename,
           utcnow,
)
from .gpu_steps import gpu_request, pending_request, pending_steps, run_gpu_step
from .report import answered_by, markdown_report, summary
from .store import Run, RunStore
from .views import connect, sql

__all__ = ["CANDIDATES", "EVENTS", "LOCK", "MANIFEST", "SIDE", "STEP_KINDS", "TASK", "EventLog", "Paused", "Run",
           "RunStore", "answered_by", "connect", "gpu_request", "markdown_report", "new_run_id", "pending_request",
           "pending_steps", "run_gpu_step", "sql", "step_filename", "summary", "utcnow"]
