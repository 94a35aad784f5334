"""Vector ranking: a query text built from the kernel, SkillDoc search restricted to the permitted
methods, and the fusion of the case order with similarity.

With a profile the case order decides (rules first; similarity only attaches guidance and examples).
Static-only, the order is a weighted reciprocal-rank fusion of the case order (weight ``CASE_WEIGHT``)
and the similarity order (weight 1), ties broken by the case order, so the answer stays deterministic.
With ``RRF_K`` = 60 the fused score is close to linear in the ranks (about ``2 * case_rank +
similarity_rank``), so a method moves up one place only when it is about three similarity ranks ahead
of its neighbour; and no method rises more than ``MAX_RISE`` (one) place above its case rank (a long
list with a nearly reversed similarity order could otherwise lift the last method by two or three).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelskill.kb.schema import Method

from .result import DocRef, MeasuredExample, PermittedMethod
from .search_cache import cached_search

log = logging.getLogger(__name__)

RRF_K = 60
CASE_WEIGHT = 2.0  # the case order counts twice as much as similarity in the static-only fusion
MAX_RISE = 1  # similarity lifts a method at most this many places above its case rank
STRUCTURES = {0: "streaming elementwise", 1: "tiled / data reuse", 2: "irregular gather-scatter",
              3: "reduction or scan", 4: "multi-kernel forward"}
_FEATURE_WORDS = {
    "has_reuse": "reuses data through shared memory or registers",
    "streaming_no_reuse": "streaming, each element read once",
    "has_vector_load_store": "16-byte vector loads",
    "has_tail_handling_overhead": "per-element tail guard in the hot loop",
    "has_multiple_kernels_in_forward": "several kernel launches per forward",
    "tc_eligible": "matrix multiply that tensor cores could run",
    "is_pointwise": "pointwise elementwise map",
    "uses_transcendentals": "exp log erf transcendentals",
    "is_naive_gemm": "naive GEMM dot product per thread from global memory",
    "has_k_loop": "multiply-accumulate loop over K",
    "is_stencil_conv": "stencil or convolution sliding window",
    "has_shared_memory_tile": "shared memory staging",
    "cudagraph_eligible": "CUDA graph capturable launches",
}
_NEGATED = {"has_vector_load_store": "scalar 4-byte accesses", "has_shared_memory_tile": "no shared memory"}


def query_text(features: Mapping[str, Any], *, op_summary: str = "", bottleneck: str | None = None,
               bottleneck_text: str = "", tier: str | None = None, kernels: Sequence[str] = ()) -> str:
    """The text the SkillDocs are ranked against (deterministic for equal inputs)."""
    parts: list[str] = []
    if bottleneck:
        parts.append(f"bottleneck: {bottleneck}. {bottleneck_text.strip().rstrip('.')}".strip())
    if tier and tier != "unknown":
        parts.append(f"headroom tier {tier}")
    structure = features.get("kernel_structure_id")
    if isinstance(structure, int) and not isinstance(structure, bool) and structure in STRUCTURES:
        parts.append(f"structure: {STRUCTURES[structure]}")
    words = [w for f, w in _FEATURE_WORDS.items() if features.get(f) is True]
    words += [w for f, w in _NEGATED.items() if features.get(f) is False]
    if words:
        parts.append("kernel: " + ", ".join(words))
    if op_summary:
        parts.append(op_summary)
    if kernels:
        parts.append("kernels " + ", ".join(kernels[:6]))
    return ". ".join(parts)


def _example_paths(kb: Any, m: Method) -> list[str]:
    if m.example is None:
        return []
    root: Path | None = None
    getter = getattr(kb, "example_root", None)
    if getter is not None:
        try:
            root = getter(m.id)
        except Exception as exc:  # noqa: BLE001 - a missing column in an older store: fall back
            log.debug("example_root(%s) failed: %s", m.id, exc)
    if root is None:
        root = Path(__file__).resolve().parent.parent / "kb" / "skills"
    return [str(root / rel) for rel in (m.example.task, m.example.before, m.example.after)]


WIDE = 256  # unfiltered neighbours read first on a large KB
WIDE_FROM_DOCS = 20_000  # below this many docs the filtered search alone is as fast (measured, 2-core box)


def _doc_count(kb: Any) -> int:
    counts = getattr(kb, "counts", None)
    if counts is None:
        return 0
    try:
        return int(counts().get("docs", 0))
    except Exception:  # noqa: BLE001 - only a strategy hint
        return 0


def _search(kb: Any, text: str, wanted: list[str], k: int) -> list[Any]:
    """The nearest docs of each wanted method, through ``search_docs`` filtered to the wanted methods.

    On a large KB Chroma's metadata filter costs far more than the search itself (98 ms against 39 ms for
    256 unfiltered neighbours at 100k docs), so there one unfiltered search of the ``WIDE`` nearest docs
    serves the methods it reaches (a method's nearest docs among all docs are its nearest docs, so they
    are what the filtered search would return) and the filtered search runs only for the others."""
    try:  # an answer already given for this question on this index comes from disk, without Chroma
        return cached_search(kb, text, wanted, k, lambda: _search_index(kb, text, wanted, k))
    except Exception as exc:  # noqa: BLE001 - ranking is advisory: the rules already decided
        log.warning("vector search failed (%s); keeping the case order", exc)
        return []


def _search_index(kb: Any, text: str, wanted: list[str], k: int) -> list[Any]:
    narrow = min(max(k * len(wanted), 8), 64)
    if _doc_count(kb) < WIDE_FROM_DOCS:
        return kb.search_docs(text, k=narrow, methods=wanted)
    wide = kb.search_docs(text, k=WIDE, methods=None)
    found = [h for h in wide if h.method in wanted]
    seen = {h.method for h in found}
    missing = [m for m in wanted if m not in seen]
    if missing and len(wide) >= WIDE:  # the KB is larger than one wide search: ask for the rest
        found += kb.search_docs(text, k=min(max(k * len(missing), 4), 64), methods=missing)
    return found


def fused_score(case_rank: int, similarity_rank: int) -> float:
    """Weighted reciprocal-rank fusion of a method's case rank and similarity rank (1 = best)."""
    return CASE_WEIGHT / (RRF_K + case_rank) + 1.0 / (RRF_K + similarity_rank)


def fuse_orders(methods: list[PermittedMethod], vec_rank: Mapping[str, int]) -> list[PermittedMethod]:
    """Static-only order: best fused score first (ties: case order), with no method placed more than
    ``MAX_RISE`` places above its case rank (at each position, only methods whose case rank is at most
    ``MAX_RISE`` behind it compete; one always does, since the lowest remaining case rank is <= it)."""
    left = sorted(methods, key=lambda p: p.case_rank)
    out: list[PermittedMethod] = []
    while left:
        pos = len(out) + 1
        eligible = [p for p in left if p.case_rank <= pos + MAX_RISE]
        best = min(eligible, key=lambda p: (-fused_score(p.case_rank, vec_rank[p.id]), p.case_rank))
        out.append(best)
        left.remove(best)
    return out


def measured_example(method: Method) -> MeasuredExample | None:
    """The latest ``measured`` evidence of ``method`` (its worked example on a GPU), if any."""
    e = method.latest_measurement()
    if e is None:
        return None
    return MeasuredExample(task=e.task, before_ms=e.before_ms, after_ms=e.after_ms, speedup=e.speedup,
                           verdict=e.verdict, hardware=e.hardware, date=e.date.isoformat(), eager_ms=e.eager_ms,
                           before_vs_eager=e.before_vs_eager, after_vs_eager=e.after_vs_eager)


def rank_methods(kb: Any, methods: list[Method], text: str, *, case_id: str | None, k: int = 3,
                 static_only: bool = False) -> list[PermittedMethod]:
    """Search docs of the permitted methods only, attach up to ``k`` per method, and order."""
    hits = _search(kb, text, [m.id for m in methods], k) if methods and text else []
    by_method: dict[str, list[Any]] = {}
    for h in hits:
        by_method.setdefault(h.method, []).append(h)
    out: list[PermittedMethod] = []
    for pos, m in enumerate(methods, start=1):
        mine = sorted(by_method.get(m.id, []), key=lambda h: (h.distance, h.id))[:k]
        docs = [DocRef(id=h.id, method=h.method, title=h.title, distance=round(float(h.distance), 4),
                       kind=(h.metadata or {}).get("kind"), text=h.text[:400]) for h in mine]
        out.append(PermittedMethod(
            id=m.id, name=m.name, rank=pos, case_rank=pos, source_case=case_id, category=m.category,
            tags=list(m.tags), guidance=m.guidance, examples=_example_paths(kb, m), docs=docs,
            similarity=round(1.0 - docs[0].distance, 4) if docs else None, measured=measured_example(m)))
    if static_only and any(p.similarity is not None for p in out):
        by_sim = sorted(out, key=lambda p: (-(p.similarity if p.similarity is not None else -1e9), p.case_rank))
        vec_rank = {p.id: i for i, p in enumerate(by_sim, start=1)}
        out = fuse_orders(out, vec_rank)
        for i, p in enumerate(out, start=1):
            p.rank = i
    return out
