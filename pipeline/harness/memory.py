"""GPU memory of one evaluation: the reference's own peak, the peak of every stage, the budget the harness
keeps to (about 3x the reference's peak), and whose an out-of-memory error is.

The reference's own peak is what running the task eagerly needs: its parameters, one input set, and the
forward's output and temporaries. The harness holds at most a few of those at a time (an input set for the
reference and one for the candidate, their outputs, a NaN-poisoned block), so an evaluation fits where the
task fits a few times over. An out-of-memory error is the candidate's only when the candidate had the room
the reference's forward needed (twice over) and still ran out; otherwise the harness left it too little, and
it is a harness failure (``details["harness_failure"]``), which the loop does not send to repair.
"""

from __future__ import annotations

import gc
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import torch

MB = 2**20
#: the harness's working set, in reference peaks (the goal is about 3x)
BUDGET_FACTOR = 3.0
#: a small task still gets this much room (the NaN block, the comparison's chunks)
BUDGET_FLOOR = 1 << 30
#: stages before the reference exists (the copy-bandwidth probe): not counted against its peak
UNCOUNTED = frozenset({"start", "load_task", "device_facts"})
#: the candidate's room, in reference forwards, below which its OOM is the harness's
CANDIDATE_ROOM_FACTOR = 2.0
#: a traced stage lists the live CUDA tensors of at least this size (``EvalConfig.memory_trace``)
TRACE_MIN_BYTES = 32 * MB


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError | MemoryError) or "out of memory" in str(exc).lower()


def oom_is_candidates(*, held_bytes: int, total_bytes: int, reference_forward_bytes: int) -> bool:
    """Whether an OOM raised inside the candidate's forward is the candidate's: it had at least twice the room
    the reference's forward used (output and temporaries) besides what the harness held."""
    room = total_bytes - held_bytes
    return room >= CANDIDATE_ROOM_FACTOR * max(reference_forward_bytes, 1)


def budget_bytes(reference_peak: int) -> int:
    return int(max(BUDGET_FACTOR * reference_peak, reference_peak + BUDGET_FLOOR))


@dataclass
class MemoryLedger:
    """Peak allocated bytes per stage (``torch.cuda.max_memory_allocated`` between stage starts)."""

    device: torch.device | None
    peaks: dict[str, int] = field(default_factory=dict)
    reference_peak: int = 0  # params + one input set + the forward's output and temporaries
    reference_forward: int = 0  # the forward's own allocation (output and temporaries)
    held: dict[str, int] = field(default_factory=dict)  # bytes allocated as each stage began
    trace: list[dict[str, Any]] | None = None  # per stage, the large live tensors and who holds them
    _stage: str | None = None

    @property
    def cuda(self) -> bool:
        return self.device is not None and self.device.type == "cuda"

    def enter(self, stage: str) -> None:
        """Close the running stage (its peak) and start measuring ``stage``."""
        self.close()
        self._stage = stage
        if self.cuda:
            self.held.setdefault(stage, self.allocated())
            if self.trace is not None:
                self.trace.append({"stage": stage, "allocated_mb": round(self.allocated() / MB, 1),
                                   "tensors": live_tensors(TRACE_MIN_BYTES)})
            torch.cuda.reset_peak_memory_stats(self.device)

    def close(self) -> None:
        if self._stage is not None and self.cuda:
            peak = int(torch.cuda.max_memory_allocated(self.device))
            self.peaks[self._stage] = max(self.peaks.get(self._stage, 0), peak)
        self._stage = None

    def allocated(self) -> int:
        return int(torch.cuda.memory_allocated(self.device)) if self.cuda else 0

    def total(self) -> int:
        return int(torch.cuda.mem_get_info(self.device)[1]) if self.cuda else 0

    def headroom(self) -> int:
        """Bytes the harness may still take within its budget (never negative)."""
        return max(0, budget_bytes(self.reference_peak) - self.allocated()) if self.cuda else BUDGET_FLOOR

    def report(self) -> dict[str, Any]:
        """``{stage: MB, ..., "reference": MB, "budget": MB, "max_over_reference": x}`` (MB rounded to 0.1)."""
        self.close()
        out: dict[str, Any] = {k: round(v / MB, 1) for k, v in self.peaks.items()}
        out["reference"] = round(self.reference_peak / MB, 1)
        out["budget"] = round(budget_bytes(self.reference_peak) / MB, 1)
        stages = [v for k, v in self.peaks.items() if k not in UNCOUNTED]
        if self.reference_peak and stages:
            out["max_over_reference"] = round(max(stages) / self.reference_peak, 2)
        return out

    def held_report(self) -> dict[str, float]:
        """``{stage: MB allocated as the stage began}``: what earlier stages left alive."""
        return {k: round(v / MB, 1) for k, v in self.held.items()}


def _holder(ref: Any, target: Any) -> str:
    """A short name for one object that refers to ``target``: a frame's function and variable, a container's
    type, an object's class."""
    if isinstance(ref, types.FrameType):
        names = [k for k, v in ref.f_locals.items() if v is target]
        return f"frame {ref.f_code.co_name}:{ref.f_lineno} ({', '.join(names) or 'not a local'})"
    if isinstance(ref, dict):
        keys = [str(k) for k, v in ref.items() if v is target][:3]
        return f"dict[{', '.join(keys)}]"
    return type(ref).__name__


def live_tensors(min_bytes: int, *, device_type: str = "cuda") -> list[dict[str, Any]]:
    """The live tensors on ``device_type`` of at least ``min_bytes`` (storage counted once) and what holds each:
    a diagnosis of memory an evaluation keeps alive longer than it should (slow: a scan of every object). A
    tensor held only by a running function's local variable has no holder the scan can name."""
    found: list[dict[str, Any]] = []
    seen: set[int] = set()
    gc.collect()
    scan = gc.get_objects()
    me = sys._getframe()
    for obj in scan:
        if not isinstance(obj, torch.Tensor) or obj.device.type != device_type:
            continue
        try:
            storage = obj.untyped_storage()
            nbytes, key = storage.nbytes(), storage.data_ptr()
        except (RuntimeError, NotImplementedError):
            continue
        if nbytes < min_bytes:
            continue
        holders = [_holder(r, obj) for r in gc.get_referrers(obj) if r is not scan and r is not me]
        found.append({"shape": list(obj.shape), "dtype": str(obj.dtype).replace("torch.", ""),
                      "mb": round(nbytes / MB, 1), "shares_storage": key in seen, "held_by": holders[:6]})
        seen.add(key)
    del scan
    return found


__all__ = ["MemoryLedger", "budget_bytes", "is_oom", "live_tensors", "oom_is_candidates"]
