"""Context facts of a query: what the task computes (op summary, dtype), the target and the policy.

The task file is read with :mod:`ast`, never imported (it would import torch and may run anything).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from kernelskill.protocols import load_protocol


def arch_sm(arch: str | None) -> int | None:
    """``"sm_90"`` / ``"90"`` / ``"9.0"`` -> 90."""
    if not arch:
        return None
    m = re.search(r"(\d+)(?:\.(\d))?", str(arch))
    if not m:
        return None
    return int(m.group(1)) * 10 + int(m.group(2)) if m.group(2) is not None else int(m.group(1))


def settings_context(settings: Any) -> dict[str, Any]:
    """Context fields that come from the settings (target arch, library policy)."""
    out: dict[str, Any] = {}
    if settings is None:
        return out
    sm = arch_sm(getattr(settings, "arch", None))
    if sm is not None:
        out["arch_sm"] = sm
    harness = getattr(settings, "harness", None)
    # the run's protocol decides the library policy (an explicit harness.library_policy overrides it)
    out["library_calls_allowed"] = load_protocol(getattr(harness, "protocol", None)).libraries_allowed
    policy = getattr(harness, "library_policy", None)
    if policy is not None:
        out["library_calls_allowed"] = policy != "forbid"
    for name in ("atol", "rtol"):  # the tolerance the harness will check with, when it is set
        value = getattr(harness, name, None)
        if value is not None:
            out[f"tolerance_{name}"] = float(value)
    return out


#: task dtype (context field) -> the harness's dtype name for its default tolerances
_HARNESS_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def default_tolerance(task_dtype: str | None, protocol: str | None = None) -> dict[str, float]:
    """The protocol's tolerance for a task dtype (the default protocol's when none is named), as context
    fields; {} if the dtype is unknown."""
    name = _HARNESS_DTYPE.get(task_dtype or "")
    if name is None:
        return {}
    atol, rtol = load_protocol(protocol).tolerance(name)
    return {"tolerance_atol": atol, "tolerance_rtol": rtol}


def dominant_kernel_share(profile: Any) -> tuple[float | None, str]:
    """The dominant kernel's share of the forward's kernel time in percent (a parsed ``Profile``), with
    the evidence; ``None`` when the profile has no durations."""
    kernels = list(getattr(profile, "kernels", []) or [])
    total = sum(k.total_duration_ns or 0.0 for k in kernels)
    if not kernels or total <= 0:
        return None, "the profile has no kernel durations"
    dom = profile.dominant()
    share = round(100.0 * (dom.total_duration_ns or 0.0) / total, 2)
    return share, (f"{dom.base_name}: {dom.total_duration_ns or 0.0:.0f} ns of {total:.0f} ns over "
                   f"{len(kernels)} kernel(s)")


def grid_blocks(grid: str | None) -> int | None:
    """``"(16, 1, 1)"`` (ncu's Grid Size) -> 16 blocks; None when it is not three positive integers."""
    dims = re.findall(r"\d+", grid or "")
    if not dims or len(dims) > 3 or any(int(d) <= 0 for d in dims):
        return None
    return math.prod(int(d) for d in dims)


def query_context(source: str | None, task: str | Path | None = None, profile: Any = None) -> Any:
    """The op-family hints of a query (:mod:`.op_hints`: task first, then source), the launches' grid
    (:mod:`.launch_grid`, with a task) and the profile's ``dominant_kernel_share_pct``, as an :class:`~.op_hints.OpHints` (``fields`` for the context,
    ``trace_steps()`` for the QueryResult trace)."""
    from .op_hints import op_hints

    hints = op_hints(source, task)
    if source and task is not None:
        from .launch_grid import launch_grid

        grid = launch_grid(source, task)
        if grid.blocks is not None:
            hints.fields["launch_grid_blocks"] = grid.blocks
        hints.evidence["launch_grid_blocks"] = grid.why
    if profile is not None:
        dom = profile.dominant() if getattr(profile, "kernels", None) else None
        blocks = grid_blocks(getattr(dom, "grid_size", None))
        if dom is not None and blocks is not None:  # measured: the profile's grid wins over the source's
            hints.fields["launch_grid_blocks"] = blocks
            hints.evidence["launch_grid_blocks"] = (f"{dom.base_name}: Grid Size {dom.grid_size} in the profile "
                                                    f"= {blocks} blocks (measured)")
        share, why = dominant_kernel_share(profile)
        if share is not None:
            hints.fields["dominant_kernel_share_pct"] = share
            hints.evidence["dominant_kernel_share_pct"] = why
    return hints
