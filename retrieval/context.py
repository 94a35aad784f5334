"""Context facts of a query: what the task computes (op summary, dtype), the target and the policy.

The task file is read with :mod:`ast`, never imported (it would import torch and may run anything).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError

_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32"}
_GLUE = {"contiguous", "view", "reshape", "size", "dim", "unsqueeze", "squeeze", "permute", "transpose",
         "to", "cuda", "cpu", "clone", "detach", "float", "flatten", "expand", "numel", "t"}


@dataclass
class TaskInfo:
    path: str
    ops: list[str] = field(default_factory=list)  # torch ops / modules the reference forward uses
    dtype: str | None = None
    shapes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = []
        if self.ops:
            parts.append("ops: " + ", ".join(self.ops))
        if self.dtype:
            parts.append(f"dtype {self.dtype}")
        if self.shapes:
            parts.append("inputs " + "; ".join(self.shapes[:4]))
        return "; ".join(parts)


def dotted_name(node: ast.AST) -> str | None:
    """``torch.nn.functional.softmax`` for the attribute chain of a call, None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def read_task(path: str | Path) -> TaskInfo:
    """Parse a KernelBench task: ops of ``Model.forward`` (and modules built in ``__init__``), dtype and
    input shapes from ``get_inputs``."""
    p = Path(path)
    try:
        source = p.read_text()
    except OSError as exc:
        raise KernelskillError(f"{p}: cannot read the task: {exc}") from exc
    try:
        tree = ast.parse(source, filename=str(p))
    except SyntaxError as exc:
        raise KernelskillError(f"{p}:{exc.lineno}: the task is not valid Python: {exc.msg}") from exc
    info = TaskInfo(path=str(p))
    ops: dict[str, None] = {}
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for fn in node.body:
                if not isinstance(fn, ast.FunctionDef):
                    continue
                for sub in ast.walk(fn):
                    if fn.name == "__init__" and isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                        name = dotted_name(sub.value.func) or ""
                        for t in sub.targets:
                            if isinstance(t, ast.Attribute) and name.split(".")[-1][:1].isupper():
                                modules[t.attr] = name.split(".")[-1]
                    if fn.name == "forward" and isinstance(sub, ast.Call):
                        name = dotted_name(sub.func) or ""
                        short = name.split(".")[-1]
                        if name.startswith("self.") and short in modules:
                            ops.setdefault(f"nn.{modules[short]}", None)
                        elif short and short not in _GLUE and not name.startswith("self."):
                            ops.setdefault(name.replace("torch.nn.functional.", "F.").replace("torch.", ""), None)
                        elif short in ("matmul", "mm", "bmm"):
                            ops.setdefault(short, None)
                    if fn.name == "forward" and isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
                        ops.setdefault("matmul", None)
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            seg = ast.get_source_segment(source, node) or ""
            m = re.search(r"dtype\s*=\s*torch\.(\w+)", seg) or re.search(r"\.(half|bfloat16)\(\)", seg)
            info.dtype = _DTYPES.get(m.group(1), m.group(1)) if m else "fp32"
            for call in re.findall(r"torch\.(?:rand|randn|ones|zeros|empty)\(([^)]*)\)", seg):
                info.shapes.append(call.strip())
    info.ops = list(ops)
    return info


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


def default_tolerance(task_dtype: str | None) -> dict[str, float]:
    """The harness's default (KernelBench) tolerance for a task dtype, as context fields; {} if unknown."""
    from kernelskill.protocols import DEFAULT_TOLERANCES

    name = _HARNESS_DTYPE.get(task_dtype or "")
    if name is None or name not in DEFAULT_TOLERANCES:
        return {}
    atol, rtol = DEFAULT_TOLERANCES[name]
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


def query_context(source: str | None, task: str | Path | None = None, profile: Any = None) -> Any:
    """The op-family hints of a query (:mod:`.op_hints`: task first, then source) plus the profile's
    ``dominant_kernel_share_pct``, as an :class:`~.op_hints.OpHints` (``fields`` for the context,
    ``trace_steps()`` for the QueryResult trace)."""
    from .op_hints import op_hints

    hints = op_hints(source, task)
    if profile is not None:
        share, why = dominant_kernel_share(profile)
        if share is not None:
            hints.fields["dominant_kernel_share_pct"] = share
            hints.evidence["dominant_kernel_share_pct"] = why
    return hints
