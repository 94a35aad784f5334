"""GPU steps as portable requests: what a paused run waits for, and how a GPU result is recorded
exactly as the loop would record it.

An evaluation's GPU time is its harness worker's ``details.worker_seconds`` (kept in its result). A profile
keeps only part of its result, so its record carries its seconds itself, ``data["seconds"]``: the
``worker_seconds`` its result's details name when they name any (the GPU pool stamps the seconds its slot
was held; a profile measured once for several runs carries the first measurement's, so each run is charged
what the profile cost, as an evaluation shared between runs is), else the wall seconds of the
``profile(...)`` call. Profiles recorded before this carry no seconds.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from kernelskill.pipeline.runs.events import TASK, step_filename
from kernelskill.pipeline.runs.exchange import Exchange
from kernelskill.pipeline.runs.store import Run

log = logging.getLogger(__name__)

#: what a profile's record keeps of its result's details: where and how it ran (gpu_pool stamps them), and
#: where its seconds went (the harness's profile: ncu's process and the worker's stages inside it)
PROVENANCE = ("evaluator", "device", "attempts", "gpu_name", "ncu_seconds", "stage_times_s")


# GPU steps as portable requests ---------------------------------------------------------------
def gpu_request(type_: str, step: str, candidate: str, *, seed: int | None = None) -> dict[str, Any]:
    """What a GPU step needs, as JSON with run-relative paths: ``type`` is ``eval`` or ``profile``."""
    if type_ not in ("eval", "profile"):
        raise ValueError(f"unknown GPU step type {type_!r}")
    return {"type": type_, "step": step, "task": TASK, "candidate": candidate, "seed": seed}


class Measured:
    """A result already measured (one of a batch), handed to :func:`run_gpu_step` as its evaluator so it is
    recorded exactly as a step the loop runs itself."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result

    def evaluate(self, task: Any, candidate: Any, *, seed: int | None = None) -> dict[str, Any]:
        return self.result

    def profile(self, task: Any, candidate: Any) -> dict[str, Any]:  # pragma: no cover - evals only
        return self.result


def timed_profile(evaluator: Any, task: Any, candidate: Any) -> dict[str, Any]:
    """``evaluator.profile(task, candidate)`` with its seconds in ``details["worker_seconds"]``: the seconds
    the result names already, else the wall seconds of the call (a copy; the evaluator's dict is left as
    it is)."""
    start = time.monotonic()
    raw = evaluator.profile(task, candidate)
    elapsed = time.monotonic() - start
    raw = dict(raw) if isinstance(raw, dict) else {}
    details = dict(raw["details"]) if isinstance(raw.get("details"), dict) else {}
    if profile_seconds(details) is None:
        details["worker_seconds"] = round(elapsed, 3)
    raw["details"] = details
    return raw


def profile_seconds(details: Any) -> float | None:
    """The seconds a profile result's ``details`` name (``worker_seconds``), or None."""
    value = details.get("worker_seconds") if isinstance(details, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return round(float(value), 3)
    return None


def run_gpu_step(run: Run, request: dict[str, Any], evaluator: Any, *, round_: int | None = None
                 ) -> dict[str, Any]:
    """Execute one GPU request with ``evaluator`` (``evaluate(task, candidate, *, seed)`` /
    ``profile(task, candidate)`` returning dicts) and append its event. Standard library only, so the
    GPU machine of a split run can call it without the LLM side's packages. A profile's record carries its
    seconds (``data["seconds"]``, see the module docstring)."""
    found = run.log.find(request["step"], request["type"])
    if found is not None:
        return found
    task, candidate = run.path / request["task"], run.path / request["candidate"]
    data: dict[str, Any] = {"candidate": request["candidate"]}
    if request["type"] == "eval":
        if request.get("seed") is not None:
            data["seed"] = request["seed"]
            data["result"] = evaluator.evaluate(task, candidate, seed=request["seed"])
        else:
            data["result"] = evaluator.evaluate(task, candidate)
    else:
        raw = timed_profile(evaluator, task, candidate)
        csv = raw.get("csv") if raw.get("ok", True) else None  # a failed profile's csv is ncu's error text
        details = raw["details"]
        data.update(ok=bool(csv), message=str(raw.get("message") or "")[:2000], seconds=profile_seconds(details))
        if any(k in details for k in PROVENANCE):
            data["details"] = {k: details[k] for k in PROVENANCE if k in details}
        if isinstance(csv, str) and csv.strip():
            rel = f"profiles/{step_filename(request['step'])[:-3]}.csv"
            (run.path / "profiles").mkdir(exist_ok=True)
            run.write_output(rel, run.log.scrub(csv))  # ncu names the host and the paths
            data["csv"] = rel
    if round_ is None and isinstance(request.get("round"), int):
        round_ = request["round"]
    return run.log.append("gpu", request["type"], data, step=request["step"], round_=round_)


def pending_request(run: Run) -> dict[str, Any] | None:
    """The step a paused run waits for (``{"side", "before", "request"}``), or None."""
    events = run.log.events
    if events and events[-1]["type"] == "run_paused":
        return events[-1]["data"]
    return None


def pending_steps(run: Run) -> list[dict[str, Any]]:
    """Everything a run waits for: unanswered LLM requests in its ``exchange/`` folder and the GPU (or
    LLM) step it is paused before; one dict per step with ``id, side, role`` and where to look."""
    out: list[dict[str, Any]] = []
    exchange = Exchange(run.path)
    for req in exchange.pending("llm"):
        if run.log.find(req.id, "llm_call") is None:
            prompt = f"{exchange.dir.name}/{req.id}.prompt.md"
            out.append({"id": req.id, "side": "llm", "role": req.role, "expects": req.expects.get("kind", "text"),
                        "prompt": prompt if (run.path / prompt).is_file() else None,
                        "request": f"{exchange.dir.name}/{req.id}.request.json"})
    waiting = pending_request(run)
    if waiting and waiting.get("before") not in {p["id"] for p in out}:
        request = waiting.get("request") or {}
        if waiting.get("side") == "gpu" and request:  # one step, or a search round's batch
            for one in request.get("batch") or [request]:
                if run.log.find(one["step"], one["type"]) is None:
                    out.append({"id": one["step"], "side": "gpu", "role": one["type"],
                                "candidate": one.get("candidate"), "seed": one.get("seed")})
        elif waiting.get("side") == "llm" and not request:
            out.append({"id": waiting["before"], "side": "llm", "role": None, "prompt": None,
                        "note": "stopped before the LLM side: resume it where the LLM (or the exchange) is"})
    return out


