"""kernelskill: make GPU kernels faster by putting expert knowledge first.

Heavy modules load lazily so that ``kernelskill.pipeline.harness`` stays importable with torch
and the standard library alone, and so that ``kernelskill --help`` starts fast.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["query", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "query":
        from kernelskill.retrieval.api import query

        return query
    raise AttributeError(f"module 'kernelskill' has no attribute {name!r}")
