"""Where a worker was and what went wrong: the stage file a dead worker leaves behind, and the failure
class of an exception raised by candidate code (sticky CUDA errors end the worker's process)."""

from __future__ import annotations

import time

from .fastpath import FastPathCompileError
from .prelude import CandidateBuildError

STICKY_PATTERNS = (
    "illegal memory access", "misaligned address", "operation not supported on global/shared",
    "unspecified launch failure", "illegal instruction", "cuda_error_illegal_address",
    "cuda error 700", "cuda error 716", "cuda error 717", "cuda error 719", "cuda error 715",
    "invalid program counter", "hardware stack error", "an illegal address",
)


class Stage:
    """Appends the current stage to a file, so the parent knows where a dead worker was."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.name = "start"
        self.t0 = time.perf_counter()
        self.times: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        self.name = name
        self.times[name] = round(time.perf_counter() - self.t0, 3)
        if self.path:
            with open(self.path, "a") as fh:
                fh.write(name + "\n")


def classify_exception(exc: BaseException) -> tuple[str, str, bool, str]:
    """(status, message, sticky, build_log) of an exception raised by candidate code."""
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if isinstance(exc, CandidateBuildError | FastPathCompileError):
        return "compile_error", str(exc).splitlines()[0], False, getattr(exc, "log", "")
    if type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure") or \
            "triton.compiler" in type(exc).__module__:
        return "compile_error", text.splitlines()[0], False, text
    if any(p in low for p in STICKY_PATTERNS):
        return "illegal_memory_access", text.splitlines()[0][:500], True, ""
    if "device-side assert" in low:
        return "runtime_error", text.splitlines()[0][:500], True, ""
    if type(exc).__name__ == "OutOfMemoryError" or "out of memory" in low or isinstance(exc, MemoryError):
        return "oom", text.splitlines()[0][:500], False, ""
    return "runtime_error", text[:1500], False, ""


