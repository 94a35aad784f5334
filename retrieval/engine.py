"""The rule engine: derived fields, headroom tier, bottleneck diagnosis, case gating and vetoes.

Everything it decides comes from the KB's data (fields, predicates, tiers, bottlenecks, cases, vetoes),
evaluated by :mod:`kernelskill.expr`; every evaluation is appended to the trace.

Order of decisions (docs/CONTRACTS.md, "Expressions"):
1. derived fields, in dependency order;
2. tier from its field's bounds; a missing value gives ``unknown`` with the reason;
3. bottleneck candidates: every bottleneck whose signature holds, by priority; a bottleneck whose
   ``forced_by`` priority rule holds moves to the front even when its signature does not;
4. the candidates' cases (from ``kb.cases_for``, filtered by tier and structure in the store) are tried
   in candidate order; when a candidate's cases do not match, the next candidate is tried, then the
   candidates' own fallback cases, then the general fallback cases. Among matching cases of one
   candidate the lowest priority wins, then the most specific, then the id;
5. permitted = the case's methods in order, minus methods whose ``requires`` is false and methods
   removed by a query-scope veto whose ``when`` holds (by method id or tag).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelskill.expr import ExprError, Value, compile_expr
from kernelskill.kb.schema import Bottleneck, Case, FieldKind, Method, Predicate, Tier, Veto
from kernelskill.kb.schema import Field as KBField

from .result import (
    BottleneckCandidate,
    BottleneckResult,
    CaseAttempt,
    CaseResult,
    ForbiddenMethod,
    TierResult,
    TraceStep,
    VetoApplied,
)

log = logging.getLogger(__name__)

UNKNOWN_TIER = "unknown"


class KBReader(Protocol):
    """The reads of ``kb.store.KBStore`` that the engine uses (docs/CONTRACTS.md)."""

    def fields(self) -> list[KBField]: ...
    def predicates(self) -> list[Predicate]: ...
    def tiers(self) -> list[Tier]: ...
    def bottlenecks(self) -> list[Bottleneck]: ...
    def vetoes(self) -> list[Veto]: ...
    def cases_for(self, bottleneck: str | None, tier: str | None, structure: int | None, *,
                  fallback: bool = False) -> list[Case]: ...
    def methods(self, ids: list[str] | None = None) -> list[Method]: ...


@dataclass
class Rules:
    """The decision data read once from the store (small: fields, predicates, tiers, ...)."""

    fields: list[KBField]
    predicates: dict[str, Predicate]
    tiers: list[Tier]
    bottlenecks: list[Bottleneck]
    vetoes: list[Veto]

    @classmethod
    def from_kb(cls, kb: KBReader) -> Rules:
        return cls(fields=kb.fields(), predicates={p.id: p for p in kb.predicates()}, tiers=kb.tiers(),
                   bottlenecks=kb.bottlenecks(), vetoes=kb.vetoes())


@dataclass
class Decision:
    env: dict[str, Value]
    tier: TierResult
    bottleneck: BottleneckResult
    case: CaseResult
    chosen: Case | None
    permitted: list[Method]
    forbidden: list[ForbiddenMethod]
    vetoes: list[VetoApplied]
    notes: list[str]
    trace: list[TraceStep] = field(default_factory=list)


class PredicateEvaluator:
    """Evaluates named predicates once each (memoized) and records them in the trace."""

    def __init__(self, env: Mapping[str, Value], predicates: Mapping[str, Predicate],
                 trace: list[TraceStep]) -> None:
        self.env = env
        self.predicates = predicates
        self.trace = trace
        self._memo: dict[str, tuple[Value, TraceStep]] = {}

    def pred(self, pid: str, used_by: str) -> Value:
        if pid in self._memo:
            value, step = self._memo[pid]
            if used_by not in step.used_by:
                step.used_by.append(used_by)
            return value
        p = self.predicates.get(pid)
        if p is None:
            step = TraceStep(kind="predicate", id=pid, value=None, used_by=[used_by],
                             note="undefined predicate (a KB error; kernelskill kb lint reports it)")
            value: Value = None
        else:
            try:
                expr = compile_expr(p.expr)
                value = expr.evaluate(self.env)
                inputs = expr.inputs(self.env)
                note = ""
            except ExprError as exc:
                value, inputs, note = None, {}, f"error: {exc}"
            if value is not None and not isinstance(value, bool):
                value = bool(value)
            step = TraceStep(kind="predicate", id=pid, expr=p.expr, inputs=inputs, value=value,
                             used_by=[used_by], note=note)
        self.trace.append(step)
        self._memo[pid] = (value, step)
        return value

    def all_true(self, pids: Iterable[str], used_by: str) -> Value:
        """Kleene AND over named predicates (True for an empty list). Evaluates every one, for the trace."""
        values = [self.pred(p, used_by) for p in pids]
        if any(v is False for v in values):
            return False
        return None if any(v is None for v in values) else True


# --------------------------------------------------------------------------------- derived fields
def derive(env: dict[str, Value], fields: list[KBField], trace: list[TraceStep]) -> None:
    """Evaluate derived fields into ``env`` in dependency order (a derived field may use another)."""
    derived = {f.id: f for f in fields if f.kind == FieldKind.derived and f.expr}
    pending = dict(derived)
    while pending:
        progressed = False
        for fid, f in list(pending.items()):
            expr = compile_expr(f.expr or "")
            if any(n in pending and n != fid for n in expr.names):
                continue
            try:
                value = expr.evaluate(env)
                note = ""
            except ExprError as exc:
                value, note = None, f"error: {exc}"
            if value is not None and f.type == "int" and isinstance(value, float) and value.is_integer():
                value = int(value)
            env[fid] = value
            trace.append(TraceStep(kind="derived", id=fid, expr=f.expr or "", inputs=expr.inputs(env),
                                   value=value, note=note))
            del pending[fid]
            progressed = True
        if not progressed:  # a cycle: lint rejects it; here, leave them unknown and say so
            for fid, f in pending.items():
                env[fid] = None
                trace.append(TraceStep(kind="derived", id=fid, expr=f.expr or "", value=None,
                                       note="cyclic definition; left unknown"))
            break


def _missing_reason(name: str, env: Mapping[str, Value], fields: Mapping[str, KBField],
                    why_missing: Mapping[str, str], depth: int = 0) -> str:
    """Explain why ``name`` is unknown, following derived fields down to the missing inputs."""
    if name in why_missing:
        return f"{name} {why_missing[name]}"
    f = fields.get(name)
    if f is not None and f.expr and depth < 4:
        missing = [n for n in compile_expr(f.expr).names if env.get(n) is None]
        if missing:
            return f"{name} = {f.expr} is unknown: " + "; ".join(
                _missing_reason(n, env, fields, why_missing, depth + 1) for n in missing)
    if f is None:
        return f"{name} is not a KB field"
    return f"{name} is unknown"


# ----------------------------------------------------------------------------------------- tiers
def decide_tier(env: Mapping[str, Value], rules: Rules, trace: list[TraceStep],
                why_missing: Mapping[str, str]) -> TierResult:
    if not rules.tiers:
        return TierResult(name=UNKNOWN_TIER, field="", value=None, reason="the KB defines no tiers")
    fields = {f.id: f for f in rules.fields}
    tiers = sorted(rules.tiers, key=lambda t: (t.order, t.id))
    field_name = tiers[0].field
    for t in tiers:
        value = env.get(t.field)
        if value is None:
            reason = _missing_reason(t.field, env, fields, why_missing)
            trace.append(TraceStep(kind="tier", id=t.id, expr=_bounds(t), inputs={t.field: None}, value=None,
                                   note=reason))
            return TierResult(name=UNKNOWN_TIER, field=t.field, value=None, reason=reason)
        inside = (t.lower is None or value >= t.lower) and (t.upper is None or value < t.upper)
        trace.append(TraceStep(kind="tier", id=t.id, expr=_bounds(t), inputs={t.field: value}, value=inside))
        if inside:
            return TierResult(id=t.id, name=t.name, field=t.field, value=float(value),
                              reason=f"{t.field} = {value:.4g} is in [{_fmt(t.lower, '-inf')}, "
                                     f"{_fmt(t.upper, 'inf')}): tier {t.name}")
    value = env.get(field_name)
    return TierResult(name=UNKNOWN_TIER, field=field_name, value=float(value) if value is not None else None,
                      reason=f"{field_name} = {value} falls in no tier's bounds (a gap in tiers.yaml)")


def _fmt(x: float | None, unbounded: str) -> str:
    return unbounded if x is None else f"{x:g}"


def _bounds(t: Tier) -> str:
    lo = "" if t.lower is None else f"{t.lower:g} <= "
    hi = "" if t.upper is None else f" < {t.upper:g}"
    return f"{lo}{t.field}{hi}"


# ----------------------------------------------------------------------------------- bottlenecks
def rank_bottlenecks(ev: PredicateEvaluator, rules: Rules, trace: list[TraceStep]) -> list[BottleneckCandidate]:
    """All bottlenecks with their signature value and the priority rules that held, candidates first:
    forced ones (by priority), then those whose signature holds (by priority), then the rest."""
    out: list[BottleneckCandidate] = []
    for b in sorted(rules.bottlenecks, key=lambda b: (b.priority, b.id)):
        sig = ev.all_true(b.signature, b.id)
        forced = [f for f in b.forced_by if ev.pred(f, b.id) is True]
        considered = sig is True or bool(forced)
        note = f"forced by {', '.join(forced)}" if forced else ""
        trace.append(TraceStep(kind="bottleneck", id=b.id, expr=" and ".join(b.signature),
                               inputs={s: ev.pred(s, b.id) for s in b.signature}, value=sig, note=note))
        out.append(BottleneckCandidate(id=b.id, name=b.name, priority=b.priority, signature=sig,
                                       forced_by=forced, considered=considered,
                                       outcome="" if considered else "not a candidate"))
    forced_first = [c for c in out if c.forced_by]
    by_sig = [c for c in out if c.signature is True and not c.forced_by]
    rest = [c for c in out if not c.considered]
    return forced_first + by_sig + rest


# ------------------------------------------------------------------------------------------ cases
def _specificity(c: Case) -> int:
    return len(c.when) + len(c.unless) + (1 if c.tiers else 0) + (1 if c.structures else 0)


def _try_cases(ev: PredicateEvaluator, cases: list[Case], attempts: list[CaseAttempt],
               trace: list[TraceStep]) -> Case | None:
    """The best matching case: lowest priority, then most specific, then id. Cases are visited by
    (priority, id), so the search stops at the first priority above that of the first match."""
    matched: list[Case] = []
    for c in sorted(cases, key=lambda c: (c.priority, c.id)):
        if matched and c.priority > matched[0].priority:
            break
        when = {p: ev.pred(p, c.id) for p in c.when}
        unless = {p: ev.pred(p, c.id) for p in c.unless}
        ok = all(v is True for v in when.values()) and not any(v is True for v in unless.values())
        failed = [p for p, v in when.items() if v is False] + [f"unless {p}" for p, v in unless.items() if v]
        unknown = [p for p, v in when.items() if v is None]
        attempts.append(CaseAttempt.model_construct(case=c.id, bottleneck=c.bottleneck, fallback=c.fallback,
                                                    matched=ok, failed=failed, unknown=unknown))
        gate = " and ".join(c.when) or "true"
        if c.unless:
            gate += " and not (" + " or ".join(c.unless) + ")"
        inputs = {**when, **{f"unless {k}": v for k, v in unless.items()}}
        trace.append(TraceStep.model_construct(kind="case", id=c.id, expr=gate, inputs=inputs, value=ok, used_by=[],
                                               note=f"priority {c.priority}" + (", fallback" if c.fallback else "")))
        if ok:
            matched.append(c)
    if not matched:
        return None
    return min(matched, key=lambda c: (c.priority, -_specificity(c), c.id))


def choose_case(ev: PredicateEvaluator, kb: KBReader, candidates: list[BottleneckCandidate], tier: str | None,
                structure: int | None, trace: list[TraceStep]) -> tuple[Case | None, BottleneckCandidate | None,
                                                                        list[CaseAttempt], str]:
    attempts: list[CaseAttempt] = []
    tried = [c for c in candidates if c.considered]
    for cand in tried:
        chosen = _try_cases(ev, kb.cases_for(cand.id, tier, structure), attempts, trace)
        if chosen is not None:
            cand.outcome = f"matched {chosen.id}"
            return chosen, cand, attempts, f"bottleneck {cand.id}: case {chosen.id} matched"
        cand.outcome = "no case matched"
    for cand in tried:  # fallback cases that belong to a candidate bottleneck
        own = [c for c in kb.cases_for(cand.id, tier, structure, fallback=True) if c.bottleneck == cand.id]
        chosen = _try_cases(ev, own, attempts, trace)
        if chosen is not None:
            cand.outcome = f"matched fallback {chosen.id}"
            return chosen, cand, attempts, f"bottleneck {cand.id}: its fallback case {chosen.id} matched"
    general = [c for c in kb.cases_for(None, tier, structure, fallback=True) if c.bottleneck is None]
    chosen = _try_cases(ev, general, attempts, trace)
    if chosen is not None:
        why = ("no bottleneck candidate" if not tried else
               f"no case of {', '.join(c.id for c in tried)} matched")
        return chosen, None, attempts, f"{why}; fallback case {chosen.id} matched"
    return None, None, attempts, "no case matched, fallback cases included"


# ------------------------------------------------------------------------------- methods / vetoes
def apply_vetoes(ev: PredicateEvaluator, rules: Rules, case: Case, methods: list[Method],
                 trace: list[TraceStep]) -> tuple[list[Method], list[ForbiddenMethod], list[VetoApplied]]:
    active: list[Veto] = []
    for v in rules.vetoes:
        if "query" not in v.scope or not (v.methods or v.tags):
            continue
        on = ev.all_true(v.when, v.id)
        trace.append(TraceStep(kind="veto", id=v.id, expr=" and ".join(v.when) or "always",
                               inputs={w: ev.pred(w, v.id) for w in v.when}, value=on,
                               note="active" if on else ("inactive" if on is False else "unknown: not applied")))
        if on is True:
            active.append(v)
    permitted: list[Method] = []
    forbidden: list[ForbiddenMethod] = []
    used: dict[str, list[str]] = {}
    for m in methods:
        veto = next((v for v in active if m.id in v.methods or set(m.tags) & set(v.tags)), None)
        if veto is not None:
            how = "by id" if m.id in veto.methods else f"by tag {sorted(set(m.tags) & set(veto.tags))[0]}"
            forbidden.append(ForbiddenMethod(id=m.id, name=m.name, by="veto", veto=veto.id, case=case.id,
                                             reason=f"{veto.title} ({how}): {veto.rationale}"))
            used.setdefault(veto.id, []).append(m.id)
            continue
        req = {r: ev.pred(r, m.id) for r in m.requires}
        if m.requires:
            trace.append(TraceStep(kind="requires", id=m.id, expr=" and ".join(m.requires), inputs=req,
                                   value=ev.all_true(m.requires, m.id)))
        failed = [r for r, val in req.items() if val is False]
        if failed:
            forbidden.append(ForbiddenMethod(id=m.id, name=m.name, by="requires", case=case.id,
                                             reason=f"requires {', '.join(failed)}, which does not hold"))
            continue
        permitted.append(m)
    applied = [VetoApplied(id=v.id, title=v.title, rationale=v.rationale, methods=v.methods, tags=v.tags,
                           removed=used.get(v.id, [])) for v in active]
    applied.sort(key=lambda a: (a.id not in used, a.id))
    return permitted, forbidden, applied


# ------------------------------------------------------------------------------------------- main
def decide(kb: KBReader, env: dict[str, Value], *, structure: int | None, rules: Rules | None = None,
           why_missing: Mapping[str, str] | None = None) -> Decision:
    """Run the whole rule pipeline on ``env`` (features + context + normalized profile fields)."""
    rules = rules or Rules.from_kb(kb)
    why_missing = why_missing or {}
    trace: list[TraceStep] = []
    notes: list[str] = []
    env = dict(env)
    derive(env, rules.fields, trace)
    tier = decide_tier(env, rules, trace, why_missing)
    ev = PredicateEvaluator(env, rules.predicates, trace)
    candidates = rank_bottlenecks(ev, rules, trace)
    tier_arg = tier.id  # cases name tiers by id; None (unknown) admits only cases that list no tier
    chosen, cand, attempts, reason = choose_case(ev, kb, candidates, tier_arg, structure, trace)
    considered = [c for c in candidates if c.considered]
    if cand is not None:
        b_reason = (f"forced by the priority rule {', '.join(cand.forced_by)}" if cand.forced_by
                    else f"signature {' and '.join(_sig(rules, cand.id))} holds")
        if considered and considered[0].id != cand.id:
            b_reason += (f"; chosen after {', '.join(c.id for c in considered if c.id != cand.id)[:200]} "
                         f"had no matching case")
        bottleneck = BottleneckResult(id=cand.id, name=cand.name, reason=b_reason, candidates=candidates)
    else:
        if considered:
            b_reason = (f"candidates {', '.join(c.id for c in considered)} had no matching case; "
                        f"answered by a fallback case")
        elif env.get("has_profile") is False:
            b_reason = "static-only query: bottleneck signatures need profile fields"
        else:
            unknown = [c.id for c in candidates if c.signature is None]
            b_reason = "no bottleneck signature holds" + (
                f" (unknown: {', '.join(unknown)})" if unknown else "")
        bottleneck = BottleneckResult(id=None, name=None, reason=b_reason, candidates=candidates)
    if chosen is None:
        case = CaseResult(id=None, title=None, rationale=None, bottleneck=None, reason=reason, attempts=attempts)
        notes.append("no decision case matched (not even a fallback): the KB needs a catch-all case")
        return Decision(env, tier, bottleneck, case, None, [], [], [], notes, trace)
    case = CaseResult(id=chosen.id, title=chosen.title, rationale=chosen.rationale, bottleneck=chosen.bottleneck,
                      fallback=chosen.fallback, priority=chosen.priority, methods=list(chosen.methods),
                      reason=reason, attempts=attempts)
    methods = kb.methods(list(chosen.methods))
    known = {m.id for m in methods}
    forbidden_unknown = [ForbiddenMethod(id=mid, reason="not a method of this KB", by="unknown_method",
                                         case=chosen.id) for mid in chosen.methods if mid not in known]
    permitted, forbidden, applied = apply_vetoes(ev, rules, chosen, methods, trace)
    return Decision(env, tier, bottleneck, case, chosen, permitted, forbidden + forbidden_unknown, applied,
                    notes, trace)


def _sig(rules: Rules, bid: str) -> list[str]:
    for b in rules.bottlenecks:
        if b.id == bid:
            return list(b.signature)
    return []


def structure_of(features: Mapping[str, Any]) -> int | None:
    v = features.get("kernel_structure_id")
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None
