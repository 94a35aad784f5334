"""The run's final pick and its speedup: the ONE number every view shows for what a run delivers.

The loop's final pick is the fastest correct candidate (not suspected by the code review) whose
re-verification on a fresh seed passed; the loop records it in its ``run_finished`` event (``best``). The
pick's speedup is the one its re-verification measured (step ``verify.<step>``): that measurement comes
after the choice, so it carries no selection bias (the round's own measurement of the fastest of many
candidates is, on average, its luckiest). The round's measurement stays available as ``found_speedup``.

Standard library only; reads the run's events alone, so ``runs list``, ``runs report``, ``bench report`` and
the HTML pages all compute the same number for the same candidate from the same log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _interval(value: Any) -> list[float] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and all(_number(v) is not None for v in value):
        return [float(value[0]), float(value[1])]
    return None


def final_pick(run_or_events: Any) -> dict[str, Any] | None:
    """The final pick of a finished run and its speedup, or ``None`` (not finished, or nothing verified).

    ``run_or_events``: a :class:`~kernelskill.pipeline.runs.store.Run`, or its events (a list of event dicts,
    e.g. cut at a round to compare two arms as they stood then). Returns ``candidate`` (run-relative path),
    ``step``, ``round``, ``method``, ``speedup`` (THE number: the re-verification's speedup over eager),
    ``speedup_ci`` (its 95 % interval, when the harness gave one), ``found_speedup`` (the round's measurement),
    ``verify_step``, ``candidate_ms`` and ``baseline_ms`` of the re-verification."""
    events: Iterable[dict[str, Any]] = (run_or_events.log.events if hasattr(run_or_events, "log")
                                        else run_or_events)
    events = list(events)
    finished = [e for e in events if e.get("type") == "run_finished"]
    best = ((finished[-1].get("data") or {}).get("best") or {}) if finished else {}
    candidate, step = best.get("candidate"), best.get("step")
    if not candidate:
        return None
    verify_step = best.get("verify_step") or (f"verify.{step}" if step else None)
    checks = [e for e in events if e.get("type") == "eval" and e.get("step") == verify_step
              and (e.get("data") or {}).get("candidate") == candidate]
    result = ((checks[-1].get("data") or {}).get("result") or {}) if checks else {}
    speed = _number(result.get("speedup")) if result.get("correct", result.get("status") == "ok") else None
    if speed is None:
        speed = _number(best.get("verified_speedup"))
    ci = _interval(result.get("speedup_ci")) or _interval(best.get("verified_speedup_ci"))
    return {"candidate": candidate, "step": step, "round": best.get("round"), "method": best.get("method"),
            "speedup": round(speed, 6) if speed is not None else None, "speedup_ci": ci,
            "found_speedup": _number(best.get("speedup")), "verify_step": verify_step,
            "candidate_ms": _number(result.get("candidate_ms")) if result else _number(best.get("candidate_ms")),
            "baseline_ms": _number(result.get("baseline_ms")) if result else _number(best.get("baseline_ms"))}


__all__ = ["final_pick"]
