"""Why a method is, or is not, in a query's answer (``kernelskill query ... --why METHOD``).

Read from the answer itself (its trace holds every predicate the engine evaluated, with the values that
decided it) and from the KB's cases: one line per reason, each with the values that decided it. The
reasons, in the order they are checked: not a method of the KB; permitted (its rank, and below the cut
when one is given); taken out as already applied by the kernel; failed before (the loop's memory, when
given); vetoed (which veto, by id or tag, and its predicates); a ``requires`` that does not hold; not in
the matched case, then for every case that lists it why that case was not the one chosen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .result import MethodWhy, QueryResult, TraceStep, Value, WhyReason


def _fmt(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_v(v)}" for k, v in values.items())


def _v(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "unknown" if v is None else str(v)


class _Trace:
    def __init__(self, steps: list[TraceStep]) -> None:
        self.pred: dict[str, TraceStep] = {}
        self.by_kind: dict[tuple[str, str], TraceStep] = {}
        for s in steps:
            if s.kind == "predicate":
                self.pred.setdefault(s.id, s)
            self.by_kind.setdefault((s.kind, s.id), s)

    def show(self, pid: str) -> tuple[str, dict[str, Value]]:
        s = self.pred.get(pid)
        if s is None:
            return f"{pid}=not evaluated", {pid: None}
        inputs = _fmt(s.inputs)
        # a context fact read from the source or the task (op hints) carries the line that decided it
        notes = [f"{k}: {n.note}" for k in s.inputs if (n := self.by_kind.get(("note", k))) is not None and n.note]
        return (f"{pid}={_v(s.value)}" + (f" ({inputs})" if inputs else "") + "".join(f" [{t}]" for t in notes),
                {pid: s.value, **s.inputs})


def explain(result: QueryResult, method: str, *, cases: Iterable[Any], methods: Iterable[Any],
            cut: int | None = None, failed: Iterable[str] = ()) -> MethodWhy:
    """Why ``method`` is or is not in ``result`` (``cases``/``methods``: every case and method of the KB)."""
    known = {m.id: m for m in methods}
    tr = _Trace(result.trace)
    if method not in known:
        return MethodWhy(method=method, status="unknown_method", in_answer=False, reasons=[WhyReason(
            kind="unknown_method", text=f"{method} is not a method of this KB (kernelskill kb list --type method)")])
    permitted = next((p for p in result.permitted if p.id == method), None)
    if permitted is not None:
        out = MethodWhy(method=method, status="permitted", in_answer=True, rank=permitted.rank)
        out.reasons.append(WhyReason(
            kind="permitted", values={"rank": permitted.rank, "case_rank": permitted.case_rank,
                                      "permitted": len(result.permitted)},
            text=f"permitted: rank {permitted.rank} of {len(result.permitted)} (position {permitted.case_rank} "
                 f"in case {result.case.id}'s order after vetoes)"))
        if cut is not None and permitted.rank > cut:
            out.reasons.append(WhyReason(kind="below_cut", values={"rank": permitted.rank, "cut": cut},
                                         text=f"below the cut: rank {permitted.rank} > {cut} shown"))
        if method in set(failed):
            out.reasons.append(WhyReason(kind="failed", text="failed before on this task (the run's memory); "
                                                              "the loop does not offer it again"))
            out.status, out.in_answer = "failed", False
        return out

    out = MethodWhy(method=method, status="not_in_case", in_answer=False)
    applied = next((a for a in result.applied if a.id == method), None)
    if applied is not None:
        where = f"line {applied.line}: {applied.evidence}" if applied.line else applied.evidence
        out.status = "applied"
        out.reasons.append(WhyReason(kind="applied", values={"line": applied.line, "in_case": applied.in_case},
                                     text=f"filtered as applied: the kernel already does it ({where}; {applied.rule})"
                                          + ("" if applied.in_case else "; the matched case does not list it either")))
    if method in set(failed):
        out.status = "failed" if out.status == "not_in_case" else out.status
        out.reasons.append(WhyReason(kind="failed", text="filtered as failed: it failed before on this task"))
    forbidden = next((f for f in result.forbidden if f.id == method), None)
    if forbidden is not None and forbidden.by == "veto":
        veto = next((v for v in result.vetoes if v.id == forbidden.veto), None)
        step = tr.by_kind.get(("veto", forbidden.veto or ""))
        preds = list(step.inputs) if step is not None else []
        shown = [tr.show(p) for p in preds]
        values: dict[str, Value] = {}
        for _, vals in shown:
            values.update(vals)
        how = ("by id" if veto is not None and method in veto.methods else
               f"by tag {', '.join(sorted(set(known[method].tags) & set(veto.tags)))}" if veto is not None else "")
        out.status = "vetoed"
        out.reasons.append(WhyReason(kind="veto", values=values,
                                     text=f"vetoed by {forbidden.veto} ({how}): "
                                          + ("; ".join(t for t, _ in shown) or "always on")))
    elif forbidden is not None and forbidden.by == "requires":
        reqs = list(known[method].requires)
        shown = [tr.show(p) for p in reqs]
        values = {}
        for _, vals in shown:
            values.update(vals)
        out.status = "requires"
        out.reasons.append(WhyReason(kind="requires", values=values,
                                     text="its requires does not hold: " + "; ".join(t for t, _ in shown)))
    if forbidden is not None or applied is not None:
        return out

    chosen = result.case
    if chosen.id is None:
        out.reasons.append(WhyReason(kind="not_in_case", text="no case matched, so nothing is permitted"))
    else:
        out.reasons.append(WhyReason(kind="not_in_case", values={"case": chosen.id},
                                     text=f"the matched case {chosen.id} does not list it "
                                          f"(it lists {', '.join(chosen.methods)})"))
    holders = [c for c in cases if method in c.methods and c.id != chosen.id]
    if not holders:
        out.reasons.append(WhyReason(kind="case_none", text=f"no case of the KB lists {method}"))
        return out
    attempts = {a.case: a for a in chosen.attempts}
    cands = {c.id: c for c in result.bottleneck.candidates}
    structure = result.features.values.get("kernel_structure_id")
    for c in sorted(holders, key=lambda c: (c.id not in attempts, c.priority, c.id)):
        out.reasons.append(_case_reason(c, attempts.get(c.id), cands, tr, result, structure, chosen))
    return out


def _case_reason(c: Any, attempt: Any, cands: dict[str, Any], tr: _Trace, result: QueryResult, structure: Any,
                 chosen: Any) -> WhyReason:
    label = f"case {c.id}" + (f" ({c.bottleneck})" if c.bottleneck else " (fallback)")
    if attempt is not None and not attempt.matched:
        shown = [tr.show(p) for p in attempt.failed if not p.startswith("unless ")]
        shown += [(f"unless {t}", v) for t, v in (tr.show(p.removeprefix("unless ")) for p in attempt.failed
                                                  if p.startswith("unless "))]
        shown += [tr.show(p) for p in attempt.unknown]
        values: dict[str, Value] = {}
        for _, vals in shown:
            values.update(vals)
        return WhyReason(kind="case_failed", values=values,
                         text=f"{label} was tried and did not match: " + "; ".join(t for t, _ in shown))
    if attempt is not None and attempt.matched:
        return WhyReason(kind="case_lost", values={"priority": c.priority, "chosen_priority": chosen.priority},
                         text=f"{label} matched but lost to {chosen.id} (priority {c.priority} vs "
                              f"{chosen.priority}, then the more specific gate)")
    if c.tiers and result.tier.id not in c.tiers:
        return WhyReason(kind="case_tier", values={"tier": result.tier.id, "tiers": ",".join(c.tiers)},
                         text=f"{label} is for tiers {', '.join(c.tiers)}; this kernel is tier {result.tier.name}")
    if c.structures and structure not in c.structures:
        return WhyReason(kind="case_structure", values={"kernel_structure_id": structure},
                         text=f"{label} is for structures {c.structures}; kernel_structure_id={structure}")
    if c.bottleneck:
        cand = cands.get(c.bottleneck)
        if cand is None:
            return WhyReason(kind="case_bottleneck", text=f"{label}: its bottleneck is not in the KB")
        if not cand.considered:
            step = tr.by_kind.get(("bottleneck", c.bottleneck))
            sig = [tr.show(p) for p in (step.inputs if step is not None else {})]
            values = {}
            for _, vals in sig:
                values.update(vals)
            return WhyReason(kind="case_bottleneck", values=values,
                             text=f"{label}: bottleneck {c.bottleneck} is not a candidate, its signature does not "
                                  f"hold: " + "; ".join(t for t, _ in sig))
        return WhyReason(kind="case_not_reached", values={"bottleneck": c.bottleneck},
                         text=f"{label}: not reached; {cand.outcome or 'an earlier candidate matched'}")
    return WhyReason(kind="case_not_reached", text=f"{label}: not reached; a case of a bottleneck candidate or a "
                                                   f"fallback of lower priority matched first")
