"""The knowledge base's advice for a task before any kernel exists: what the seed (generator) prompt carries.

Per operation family of the reference's ``forward`` (GEMM, conv, attention, softmax, normalization, reduction,
scan, pooling, elementwise, ...), the routes the KB puts first for it under the run's protocol, each with its
guidance and its measured effect. The retriever seam (:meth:`~kernelskill.pipeline.loop.adapters.KBRetriever.
task_advice`) builds it; the loop records it once per run (step ``advice.task``) so a resumed or moved run
shows the same seed prompt without the KB.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

#: the operation families of the task files (retrieval's ``op_hints.yaml`` task families) as the prompts name them
FAMILY_NAMES = {"gemm": "GEMM", "gemv": "GEMM", "conv": "conv", "attention": "attention", "softmax": "softmax",
                "norm": "normalization", "rms_norm": "normalization", "reduction": "reduction", "scan": "scan",
                "pool": "pooling", "elementwise": "elementwise", "gather": "gather", "scatter": "scatter"}

#: how many routes per family the seed prompt shows
ROUTES_PER_FAMILY = 3


class Route(BaseModel):
    """One route the KB puts first for a family: a method with its guidance and what it measured."""

    method_id: str
    name: str = ""
    guidance: str = ""
    effect: str = ""  # the measured effect in words ("" when the method carries no measurement)


class FamilyAdvice(BaseModel):
    family: str  # GEMM | conv | attention | softmax | normalization | reduction | scan | pooling | elementwise ...
    evidence: str = ""  # where the reference runs it ("task.py:12: Model.forward calls matmul")
    routes: list[Route] = Field(default_factory=list)


class TaskAdvice(BaseModel):
    protocol: str
    families: list[FamilyAdvice] = Field(default_factory=list)
    note: str = ""  # why some family has no routes (e.g. the KB answered for the dominant family only)

    def has_routes(self) -> bool:
        return any(f.routes for f in self.families)


def measured_effect(method: dict[str, Any]) -> str:
    """A permitted method's measurement in words: its speedup on its worked example and, where the record has
    them, what the example's before and after ran at against eager."""
    m = method.get("measured") or {}
    speed = m.get("speedup")
    if not isinstance(speed, int | float):
        return ""
    example = (method.get("example") or {}).get("label") if isinstance(method.get("example"), dict) else None
    text = (f"{speed:.2f}x over its own 'before' on its worked example"
            + (f' "{example}"' if example else "") + f" ({m.get('hardware') or 'GPU'})")
    before, after = m.get("before_vs_eager"), m.get("after_vs_eager")
    if isinstance(before, int | float) and isinstance(after, int | float):
        text += f"; before {before:.2f}x and after {after:.2f}x of eager PyTorch"
    if m.get("verdict") == "no_gain":
        text += "; a gain inside the timing noise"
    elif m.get("verdict") == "slower":
        text += "; slower than before there"
    return text
