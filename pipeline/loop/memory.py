"""Short-term memory of one task: every attempt and every repair of a run.

The loop rebuilds it while it walks its own log, so a resumed run has exactly the memory it had.
Planner, optimizer, diagnoser and repairer see it through the ``history`` partial. A method whose
attempt on a parent failed (did not build, was wrong, or was not accepted as faster) is not offered
to the planner again for that same parent: plans are free text, so "the same plan" is taken to be
"the same method on the same parent"; the filtered methods and their reasons are shown to the planner.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, Field

#: profile fields whose change between parent and child is worth showing to the next planner
KEY_PROFILE_FIELDS = ("kernel_duration_ns", "dram_throughput_pct", "l2_throughput_pct", "sm_throughput_pct",
                      "achieved_occupancy_pct", "registers_per_thread", "memory_dependency_stall_ratio")


#: the result class of a candidate the harness could not evaluate in its own stages (not the code's failure)
HARNESS_FAILURE = "harness_failure"


class Attempt(BaseModel):
    round: int
    step: str
    candidate: str | None  # path relative to the run folder; None when the answer held no code
    parent: str | None  # the accepted candidate this line of work started from
    branch: str  # generate | repair | optimize
    derived_from: str | None = None  # the candidate whose code was changed (the failed one, for a repair)
    method: str | None = None
    plan: str | None = None
    diff_summary: str = ""
    result_class: str  # ok | a harness failure class | invalid_output | harness_failure
    correct: bool = False
    speedup: float | None = None
    accepted: bool = False
    review: str = ""
    profile_deltas: dict[str, float] = Field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return not (self.correct and self.accepted)


class Repair(BaseModel):
    round: int
    candidate: str  # the failed candidate that was repaired
    error_class: str
    diagnosis: str
    fix: str
    outcome: str | None = None  # result class of the repaired candidate


def diff_summary(before: str | None, after: str | None) -> str:
    if not before or not after:
        return ""
    added = removed = 0
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return f"+{added}/-{removed} lines"


#: how much of a candidate's diff against its parent the reviewer is shown
#: the reviewer judges the change from this diff alone, so it holds a whole rewrite of a large candidate (a
#: 24,000-character cap cut a real cuDNN-split convolution's diff 106 lines short, and the reviewer said so)
DIFF_MAX_LINES = 2_000
DIFF_MAX_CHARS = 96_000


def unified_diff(before: str | None, after: str | None, *, before_name: str = "parent",
                 after_name: str = "candidate", max_lines: int = DIFF_MAX_LINES,
                 max_chars: int = DIFF_MAX_CHARS) -> str:
    """The unified diff of ``after`` against ``before`` (3 lines of context), at most ``max_lines`` lines and
    ``max_chars`` characters; a diff cut there ends with a line that says how many lines were left out."""
    if before is None or after is None:
        return ""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), fromfile=before_name,
                                      tofile=after_name, lineterm=""))
    kept: list[str] = []
    size = 0
    for line in lines:
        if len(kept) >= max_lines or size + len(line) + 1 > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(lines):
        kept.append(f"... (the diff continues for {len(lines) - len(kept)} more lines, not shown)")
    return "\n".join(kept)


class Memory:
    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.repairs: list[Repair] = []

    def add_attempt(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)

    def add_repair(self, repair: Repair) -> None:
        self.repairs.append(repair)

    def attempt_for(self, candidate: str) -> Attempt | None:
        return next((a for a in self.attempts if a.candidate == candidate), None)

    def set_profile_deltas(self, candidate: str, parent_fields: dict[str, float],
                           fields: dict[str, float]) -> None:
        attempt = self.attempt_for(candidate)
        if attempt is None:
            return
        attempt.profile_deltas = {k: round(fields[k] - parent_fields[k], 4) for k in KEY_PROFILE_FIELDS
                                  if isinstance(fields.get(k), int | float)
                                  and isinstance(parent_fields.get(k), int | float)}

    def failed_methods(self, parent: str) -> dict[str, str]:
        """method -> why it is not offered again on ``parent``."""
        out: dict[str, str] = {}
        succeeded: set[str] = set()
        for a in self.attempts:  # an optimization and the repairs that followed it share parent and method
            if a.branch not in ("optimize", "repair") or a.parent != parent or not a.method:
                continue
            if a.result_class == HARNESS_FAILURE:  # the harness's limit, not the method's: offered again
                continue
            if not a.failed:
                succeeded.add(a.method)
            else:
                why = a.result_class if a.result_class != "ok" else (a.review or "not faster than its parent")
                out[a.method] = f"round {a.round}: {why}"
        return {m: why for m, why in out.items() if m not in succeeded}

    def paid_methods(self, parent: str) -> dict[str, str]:
        """method -> where it paid on another parent (correct, accepted, faster than that parent): the
        search offers these first to a frontier member that has not tried them."""
        out: dict[str, str] = {}
        tried = {a.method for a in self.attempts if a.parent == parent and a.method}
        for a in self.attempts:
            if (a.branch in ("optimize", "repair") and a.parent != parent and a.method and not a.failed
                    and a.method not in tried):
                out[a.method] = f"round {a.round}: {a.speedup or 0.0:.2f}x from {a.parent}"
        return out

    def view(self, last: int = 12) -> dict[str, Any]:
        """What the templates show: the latest attempts and repairs, oldest first."""
        return {
            "attempts": [a.model_dump() for a in self.attempts[-last:]],
            "repairs": [r.model_dump() for r in self.repairs[-last:]],
            "total_attempts": len(self.attempts),
        }
