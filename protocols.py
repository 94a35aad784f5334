"""Named evaluation protocols: the rules a candidate is judged by, in one place.

A protocol fixes the numeric tolerance per dtype, whether vendor libraries (cuBLAS, cuDNN) may do the main
computation, whether TF32 (or another reduced-precision input path) is acceptable inside an fp32 task,
how the harness treats torch compute ops in a candidate, and which shapes are checked. The harness checks
with it, the query's vetoes follow it (through :meth:`Protocol.context`) and the prompts state it, so the
model, the knowledge base and the judge all read the same contract. Every result and report names it.

The precision a task is evaluated in (``fp32``, ``bf16``, ``fp16``: :data:`PRECISIONS`) is a separate
setting beside the protocol; the protocol's tolerance for that dtype is the one the harness applies.

Presets: ``strict`` (the project's own rules: IEEE fp32 accuracy, no library doing the main work, torch
compute ops rejected) and ``kernelbench`` (what KernelBench's current evaluation accepts: its per-dtype
tolerances, library GEMM/conv allowed, torch compute ops allowed with a warning). A user protocol is a
TOML or JSON file with the same keys, starting from a preset (``base = "strict"``).

Standard library only: the harness on a bare GPU box and a cold query both import this leaf module.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError

#: dtype -> (atol, rtol): KernelBench's current defaults, which both presets start from
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float64": (1e-7, 1e-7),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}

#: the float64 check of a fp32 task: the candidate's largest error against a float64 run of the reference,
#: normalised by the largest magnitude of that output (max |out - ref64| / max |ref64|), may be at most
#: ``max(FP64_ERROR_FACTOR * the fp32 reference's own such error, FP64_ERROR_FLOOR)``; beyond it the candidate
#: computes in lower precision (rejected unless the protocol allows TF32, where it is a warning)
FP64_ERROR_FACTOR = 32
FP64_ERROR_FLOOR = 2e-5

#: the task precisions a run may be evaluated in (KernelBench's ``precision`` argument); fp32 is the default
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
DEFAULT_PRECISION = "fp32"
#: precision -> the torch dtype name the harness casts to and looks tolerances up by
PRECISION_DTYPES: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}

LIBRARY_POLICIES = ("forbid", "allow_gemm_conv")
TORCH_OP_POLICIES = ("reject", "warn")
SHAPE_POLICIES = ("vary_all", "batch_only", "none")


@dataclass(frozen=True)
class Protocol:
    """One evaluation contract. ``tolerances`` maps a torch dtype name to ``(atol, rtol)``."""

    name: str
    description: str
    tolerances: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    library_policy: str = "forbid"  # forbid | allow_gemm_conv
    allow_tf32: bool = False  # may an fp32 task's candidate compute with TF32 inputs
    torch_ops: str = "reject"  # reject | warn: torch compute ops doing the main work in a candidate
    shapes: str = "vary_all"  # vary_all | batch_only | none: the second shape set

    def __post_init__(self) -> None:
        for key, allowed in (("library_policy", LIBRARY_POLICIES), ("torch_ops", TORCH_OP_POLICIES),
                             ("shapes", SHAPE_POLICIES)):
            value = getattr(self, key)
            if value not in allowed:
                raise KernelskillError(f"protocol {self.name}: {key} = {value!r} is not one of {list(allowed)}")
        for dtype, pair in self.tolerances.items():
            if len(pair) != 2 or any(not isinstance(v, int | float) or v < 0 for v in pair):
                raise KernelskillError(f"protocol {self.name}: tolerances.{dtype} must be [atol, rtol] >= 0")

    def tolerance(self, dtype: str) -> tuple[float, float]:
        """``(atol, rtol)`` for a torch dtype name (``float32``...); fp32's for an unknown dtype."""
        pair = self.tolerances.get(dtype) or self.tolerances.get("float32") or DEFAULT_TOLERANCES["float32"]
        return float(pair[0]), float(pair[1])

    @property
    def libraries_allowed(self) -> bool:
        return self.library_policy != "forbid"

    def context(self, task_dtype: str | None = "fp32") -> dict[str, Any]:
        """The query context fields this protocol decides (the KB's vetoes and cases gate on them)."""
        dtype = PRECISION_DTYPES.get(task_dtype or "fp32", "float32")
        atol, rtol = self.tolerance(dtype)
        return {"tolerance_atol": atol, "tolerance_rtol": rtol, "library_calls_allowed": self.libraries_allowed,
                "tf32_allowed": self.allow_tf32, "protocol": self.name}

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["tolerances"] = {k: list(v) for k, v in self.tolerances.items()}
        return out


PRESETS: dict[str, Protocol] = {
    "strict": Protocol(
        name="strict",
        description="IEEE fp32 accuracy (atol=rtol=1e-4 for fp32), no TF32, no vendor library for the main "
                    "computation, torch compute ops rejected, every module-level size varied in a second shape set",
    ),
    "kernelbench": Protocol(
        name="kernelbench",
        description="KernelBench's current evaluation: its per-dtype tolerances, cuBLAS/cuDNN allowed for "
                    "GEMM/conv, torch compute ops allowed with a warning",
        library_policy="allow_gemm_conv",
        torch_ops="warn",
        shapes="batch_only",
    ),
}

DEFAULT_PROTOCOL = "strict"


def check_precision(value: str | None, where: str = "--precision") -> str:
    """``value`` when it is one of :data:`PRECISIONS` (``None``: the default); else a one-line error."""
    if value is None or value == "":
        return DEFAULT_PRECISION
    if value not in PRECISIONS:
        raise KernelskillError(f"{where}: {value!r} is not a precision; one of {', '.join(PRECISIONS)}")
    return value


def load_protocol(name_or_path: str | Path | None = None) -> Protocol:
    """A preset by name, or a user protocol file (TOML or JSON; ``base`` names the preset it starts from)."""
    if name_or_path is None or name_or_path == "":
        return PRESETS[DEFAULT_PROTOCOL]
    key = str(name_or_path)
    if key in PRESETS:
        return PRESETS[key]
    path = Path(key)
    if not path.is_file():
        raise KernelskillError(f"protocol {key!r}: not a preset ({', '.join(PRESETS)}) and not a file")
    try:
        raw = path.read_text(encoding="utf-8")
        data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise KernelskillError(f"{path}: cannot read protocol: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise KernelskillError(f"{path}: a protocol file is a table of keys")
    base = PRESETS.get(str(data.pop("base", DEFAULT_PROTOCOL)))
    if base is None:
        raise KernelskillError(f"{path}: base must be one of {list(PRESETS)}")
    names = {f.name for f in dataclasses.fields(Protocol)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise KernelskillError(f"{path}: unknown protocol key(s) {unknown}; known: {sorted(names)}")
    values = base.to_dict() | {"name": path.stem} | data
    tolerances = dict(base.tolerances)
    for dtype, pair in (values.get("tolerances") or {}).items():
        if not isinstance(pair, list | tuple):
            raise KernelskillError(f"{path}: tolerances.{dtype} must be [atol, rtol]")
        tolerances[dtype] = tuple(pair)
    values["tolerances"] = tolerances
    return Protocol(**values)
