"""Can this machine evaluate a candidate at all? One clear line when it cannot, before anything is built.

A machine without a CUDA device (or with a driver torch cannot use), or without nvcc for a candidate
that compiles CUDA, cannot judge a CUDA candidate. That is the machine's problem, not the candidate's:
:func:`check_machine` raises :class:`HarnessUnavailable` (a :class:`KernelskillError`, so the CLI exits
2) and no result is cached under the candidate's source hash. Pure-PyTorch candidates still run on the
CPU device, for testing.
"""

from __future__ import annotations

import functools
import os

from kernelskill.errors import KernelskillError

from .fastpath import find_nvcc
from .isolation import NAMESPACES, protect
from .isolation import available as available_isolation

#: text that means a candidate runs CUDA code of its own (else it may be evaluated on the CPU device)
CUDA_MARKERS = ("load_inline", "cpp_extension", "CudaModule", "fastpath", "compile_cubin", "nvrtc", "cupy",
                "__global__", "triton")
#: markers of a candidate that needs nvcc to build (the fast path can fall back to NVRTC)
NVCC_MARKERS = ("load_inline", "cpp_extension")


class HarnessUnavailable(KernelskillError):
    """This machine cannot evaluate the candidate (no CUDA device, unusable driver, no nvcc)."""


def needs_cuda(source: str, kind: str) -> bool:
    return kind == "cu" or any(m in source for m in CUDA_MARKERS)


@functools.lru_cache(maxsize=1)
def cuda_problem() -> str | None:
    """Why torch cannot use a CUDA device here (None when it can). Creates no CUDA context."""
    if os.environ.get("KERNELSKILL_HARNESS_DEVICE") == "cpu":
        return "the harness is forced onto the CPU (KERNELSKILL_HARNESS_DEVICE=cpu)"
    try:
        import torch
    except ImportError:  # pragma: no cover - the harness needs torch
        return "torch is not installed"
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    if torch.cuda.is_available():
        return None
    try:
        torch.cuda.init()  # fails with the driver's reason (no driver, driver too old, no device)
    except Exception as exc:  # noqa: BLE001 - the reason is the message
        return str(exc).strip().splitlines()[0][:300]
    return "no CUDA device is visible (CUDA_VISIBLE_DEVICES?)"


def check_machine(source: str, kind: str, *, building: bool = False) -> None:
    """Raise :class:`HarnessUnavailable` when this machine cannot build (``building``) or run the candidate."""
    if not needs_cuda(source, kind):
        return
    if (kind == "cu" or any(m in source for m in NVCC_MARKERS)) and find_nvcc() is None:
        raise HarnessUnavailable("cannot evaluate a CUDA candidate here: nvcc is not on PATH and CUDA_HOME has "
                                 "none (install the CUDA toolkit or set CUDA_HOME)")
    if not building:
        problem = cuda_problem()
        if problem:
            raise HarnessUnavailable(f"cannot evaluate a CUDA candidate here: {problem}")


class WeakIsolation(KernelskillError):
    """Candidates would run with process isolation only, and the user did not accept that."""


WEAK_ISOLATION_FLAG = "--allow-weak-isolation"


def require_isolation(allow_weak: bool, *, home: str | None = None) -> str:
    """Before a command runs candidates: the isolation they will get. Raises :class:`WeakIsolation` (exit 2)
    where only process isolation is available and ``allow_weak`` is off. ``home`` (the settings' home
    folder, its ``kernelskill.toml`` holds the key) is hidden from every worker from now on."""
    if home:
        protect(home)
    mode = available_isolation()
    if mode != NAMESPACES and not allow_weak:
        raise WeakIsolation("candidates would run with process-only isolation here (user namespaces are not "
                            "available), so generated code could read your files and reach the network; pass "
                            f"{WEAK_ISOLATION_FLAG} to run them anyway")
    return mode


__all__ = ["WEAK_ISOLATION_FLAG", "HarnessUnavailable", "WeakIsolation", "check_machine", "cuda_problem",
           "needs_cuda", "require_isolation"]
