"""Candidate formats: what the code-writing roles are asked to write, and what an answer must contain.

``load_inline`` (a C++/CUDA extension), ``fastpath`` (``extern "C"`` kernels launched by the harness's
fast path) and ``triton`` (``@triton.jit`` kernels launched from ``ModelNew.forward``). The prompts branch
on the format (``prompts/partials/system.j2``); a Triton answer must define at least one Triton kernel;
and the knowledge base's guidance, written for CUDA, comes with a note on how each method reads in Triton
where it differs (``kb/triton_notes.yaml``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from kernelskill.errors import KernelskillError

FORMATS = ("load_inline", "fastpath", "triton")
TRITON_NOTES = Path(__file__).resolve().parents[2] / "kb" / "triton_notes.yaml"


@lru_cache(maxsize=4)
def _notes(path: Path) -> dict[str, str]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KernelskillError(f"{path}: cannot read the Triton notes: {exc}") from exc
    notes = data.get("notes") if isinstance(data, dict) else None
    if not isinstance(notes, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in notes.items()):
        raise KernelskillError(f"{path}: expected a mapping 'notes' of method id -> text")
    return {k: " ".join(v.split()) for k, v in notes.items()}


def format_notes(candidate_format: str, path: Path = TRITON_NOTES) -> dict[str, str]:
    """Method id -> how the method reads in this format, where that differs from the CUDA guidance."""
    return _notes(path) if candidate_format == "triton" else {}


def prompt_context(candidate_format: str) -> dict[str, Any]:
    """What every prompt template gets to branch on the format."""
    if candidate_format not in FORMATS:
        raise KernelskillError(f"candidate format {candidate_format!r} is not one of {', '.join(FORMATS)}")
    return {"candidate_format": candidate_format, "format_notes": format_notes(candidate_format)}


