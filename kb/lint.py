"""Static checks over a :class:`SkillSet`: findings with severity, ``file:line``, message and code.

Errors block an ingest; warnings do not. The checks: references to undefined predicates, methods,
bottlenecks, tiers and fields; expressions naming unknown symbols or using syntax outside the expression
language (docs/CONTRACTS.md); cases that can never match (contradictory constraints, a tier or structure
outside the domain, a predicate both required and excluded); tiers that overlap or leave gaps; unused
predicates and methods no case permits; holes in the bottleneck x tier x structure coverage matrix; dead
ends, where a case that can be chosen under some protocol leaves fewer than two methods after the vetoes
(the protocol coverage, see :meth:`_Linter.protocol_coverage`).
"""

from __future__ import annotations

import ast
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from kernelskill.expr import ExprError, compile_expr
from kernelskill.kb.loader import LoadIssue, Location, SkillSet
from kernelskill.kb.schema import Case, Method
from kernelskill.protocols import PRESETS, Protocol

ALLOWED_FUNCS = {"min": (1, None), "max": (1, None), "abs": (1, 1), "defined": (1, 1)}
DEFAULT_STRUCTURES = [0, 1, 2, 3, 4]
STRUCTURE_FIELD = "kernel_structure_id"

#: The protocol coverage walks bottleneck x tier x structure x protocol, and for each protocol these values of
#: the other context fields a protocol does not fix: the task's dtype, the target architecture (sm_80 and
#: sm_90 differ in the hopper-only and async-copy vetoes) and the shape of the measured forward ("any": the
#: profile says nothing about it; "custom_kernel_dominates": one custom kernel takes 90 % or more of it, which
#: the fusion and graph vetoes read). A case that can be chosen must keep MIN_PERMITTED methods in each.
COVERAGE_DTYPES: tuple[str, ...] = ("fp32", "fp16")
COVERAGE_ARCHS: tuple[int, ...] = (80, 90)
FORWARD_SHAPES: dict[str, dict[str, Any]] = {
    "any": {},
    "custom_kernel_dominates": {"has_profile": True, "dominant_kernel_share_pct": 95.0, "vendor_kernel_dominant": False},
}
MIN_PERMITTED = 2
FALLBACK_ROW = "(fallback)"


class Finding(BaseModel):
    severity: Literal["error", "warning"]
    file: str
    line: int
    message: str
    code: str
    object_id: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.severity}: {self.message} [{self.code}]"


class CoverageRow(BaseModel):
    bottleneck: str
    tier: str
    counts: dict[int, int]  # structure -> number of cases that can serve the cell


class Scenario(BaseModel):
    """One point of the protocol dimension: a protocol preset and the context values it does not fix."""

    protocol: str
    dtype: str
    arch_sm: int
    forward: str

    def label(self) -> str:
        shape = "" if self.forward == "any" else f", {self.forward.replace('_', ' ')}"
        return f"{self.protocol} ({self.dtype}, sm_{self.arch_sm}{shape})"


class ProtocolCell(BaseModel):
    """bottleneck x tier x structure under one scenario: the cases that can be chosen there and how many
    methods each keeps after the vetoes (a cell no case can serve has no entry: the fallback answers)."""

    scenario: Scenario
    bottleneck: str
    tier: str
    structure: int
    permitted: dict[str, int]  # case id -> methods left after vetoes and requires

    @property
    def min_permitted(self) -> int | None:
        return min(self.permitted.values()) if self.permitted else None


class LintReport(BaseModel):
    findings: list[Finding]
    coverage: list[CoverageRow]
    structures: list[int]
    protocol_coverage: list[ProtocolCell] = []

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def holes(self) -> int:
        return sum(1 for row in self.coverage for n in row.counts.values() if n == 0)

    def dead_ends(self) -> int:
        """Cells of the protocol coverage where a case that can be chosen keeps fewer than MIN_PERMITTED methods."""
        return sum(1 for cell in self.protocol_coverage
                   if cell.min_permitted is not None and cell.min_permitted < MIN_PERMITTED)

    def protocol_summary(self) -> list[dict[str, Any]]:
        """One row per scenario: cells some case serves, the fewest methods a reachable case keeps, dead ends."""
        rows: dict[str, dict[str, Any]] = {}
        for cell in self.protocol_coverage:
            label = cell.scenario.label()
            row = rows.setdefault(label, {"scenario": label, **cell.scenario.model_dump(), "cells": 0,
                                          "min_permitted": None, "dead_ends": 0})
            low = cell.min_permitted
            if low is None:
                continue
            row["cells"] += 1
            row["min_permitted"] = low if row["min_permitted"] is None else min(row["min_permitted"], low)
            row["dead_ends"] += int(low < MIN_PERMITTED)
        return list(rows.values())


# --------------------------------------------------------------------------------------------------
# expressions


def expression_names(expr: str) -> set[str]:
    """Validate ``expr`` with the evaluator's own compiler (:mod:`kernelskill.expr`) and return the symbols
    it names, so lint and evaluation accept exactly the same language."""
    return set(compile_expr(expr).names)


# --------------------------------------------------------------------------------------------------
# constraints, for contradiction checks


@dataclass
class Constraint:
    """What a conjunction of simple comparisons says about one field."""

    lo: float = -math.inf
    lo_incl: bool = True
    hi: float = math.inf
    hi_incl: bool = True
    allowed: set[Any] | None = None  # equality / membership
    banned: set[Any] = field(default_factory=set)
    sources: list[str] = field(default_factory=list)

    def add_lo(self, v: float, incl: bool) -> None:
        if v > self.lo or (v == self.lo and not incl):
            self.lo, self.lo_incl = v, incl

    def add_hi(self, v: float, incl: bool) -> None:
        if v < self.hi or (v == self.hi and not incl):
            self.hi, self.hi_incl = v, incl

    def restrict(self, values: set[Any]) -> None:
        self.allowed = set(values) if self.allowed is None else self.allowed & set(values)

    def empty(self) -> bool:
        if self.lo > self.hi or (self.lo == self.hi and not (self.lo_incl and self.hi_incl)):
            return True
        if self.allowed is not None:
            ok = [v for v in self.allowed if v not in self.banned and self._in_range(v)]
            return not ok
        return False

    def _in_range(self, v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return self.lo == -math.inf and self.hi == math.inf
        lo_ok = v > self.lo or (self.lo_incl and v == self.lo)
        hi_ok = v < self.hi or (self.hi_incl and v == self.hi)
        return lo_ok and hi_ok


_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}


def _literal(node: ast.AST) -> tuple[bool, Any]:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool | int | float | str):
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, int | float) and not isinstance(node.operand.value, bool):
        return True, -node.operand.value
    return False, None


def simple_constraints(expr: str) -> list[tuple[str, str, Any]]:
    """``(field, op, value)`` atoms that must all hold when ``expr`` is True (top-level ``and`` only)."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return []
    parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    atoms: list[tuple[str, str, Any]] = []
    for part in parts:
        if isinstance(part, ast.Name):
            atoms.append((part.id, "==", True))
        elif isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not) and isinstance(part.operand, ast.Name):
            atoms.append((part.operand.id, "==", False))
        elif isinstance(part, ast.Compare):
            terms = [part.left, *part.comparators]
            for left, op, right in zip(terms, part.ops, terms[1:], strict=False):
                if isinstance(op, ast.In | ast.NotIn) and isinstance(left, ast.Name) \
                        and isinstance(right, ast.List | ast.Tuple):
                    vals = [_literal(e) for e in right.elts]
                    if all(ok for ok, _ in vals):
                        atoms.append((left.id, "in" if isinstance(op, ast.In) else "not in", {v for _, v in vals}))
                    continue
                if type(op) not in _FLIP:
                    continue
                lit_r, val_r = _literal(right)
                lit_l, val_l = _literal(left)
                if isinstance(left, ast.Name) and lit_r:
                    atoms.append((left.id, type(op).__name__, val_r))
                elif isinstance(right, ast.Name) and lit_l:
                    atoms.append((right.id, _FLIP[type(op)].__name__, val_l))
    return atoms


def _apply(c: Constraint, op: str, value: Any) -> None:
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if op == "Lt" and numeric:
        c.add_hi(value, False)
    elif op == "LtE" and numeric:
        c.add_hi(value, True)
    elif op == "Gt" and numeric:
        c.add_lo(value, False)
    elif op == "GtE" and numeric:
        c.add_lo(value, True)
    elif op in ("Eq", "=="):
        c.restrict({value})
    elif op == "in":
        c.restrict(value)
    elif op == "NotEq":
        c.banned.add(value)
    elif op == "not in":
        c.banned |= set(value)


# --------------------------------------------------------------------------------------------------
# the linter


class _Linter:
    def __init__(self, skills: SkillSet, protocols: dict[str, Protocol] | None = None) -> None:
        self.s = skills
        self.protocols = PRESETS if protocols is None else protocols
        self.findings: list[Finding] = []
        self.fields = {f.id: f for f in skills.fields}
        self.predicates = {p.id: p for p in skills.predicates}
        self.tiers = {t.id: t for t in skills.tiers}
        self.bottlenecks = {b.id: b for b in skills.bottlenecks}
        self.methods = {m.id: m for m in skills.methods}
        self.pred_names: dict[str, set[str]] = {}
        self._compiled: dict[str, Any] = {}
        self._facts: dict[str, dict[str, Any]] = {}

    def add(self, severity: str, obj_id: str | None, message: str, code: str) -> None:
        loc = self.s.locations.get(obj_id or "", Location("<kb>", 0))
        self.findings.append(Finding(severity=severity, file=loc.file, line=loc.line, message=message,
                                     code=code, object_id=obj_id))

    def refs(self, obj_id: str, what: str, ids: Iterable[str], known: dict[str, Any] | set[str],
             code: str, severity: str = "error") -> None:
        for ref in ids:
            if ref not in known:
                self.add(severity, obj_id, f"{obj_id}: {what} {ref!r} is not defined", code)

    def structures(self) -> list[int]:
        f = self.fields.get(STRUCTURE_FIELD)
        if f is not None and f.domain:
            return sorted(int(v) for v in f.domain if isinstance(v, int) and not isinstance(v, bool))
        return list(DEFAULT_STRUCTURES)

    def run(self) -> LintReport:
        self.expressions()
        self.references()
        self.cases_reachable()
        self.tier_layout()
        self.unused()
        self.backing()
        coverage = self.coverage()
        protocol_cells = self.protocol_coverage()
        order = {"error": 0, "warning": 1}
        # a dead end is a consequence (of an undefined method, a veto): the cause is reported first
        self.findings.sort(key=lambda f: (order[f.severity], f.code == "dead_end", f.file, f.line, f.code))
        return LintReport(findings=self.findings, coverage=coverage, structures=self.structures(),
                          protocol_coverage=protocol_cells)

    # -- checks -------------------------------------------------------------------------------
    def expressions(self) -> None:
        for p in self.s.predicates:
            self.pred_names[p.id] = self._expr(p.id, p.expr)
        derived: dict[str, set[str]] = {}
        for f in self.s.fields:
            if f.expr:
                derived[f.id] = self._expr(f.id, f.expr)
        # derived fields must not depend on themselves (directly or through others)
        for start in derived:
            stack, seen = [start], set()
            while stack:
                cur = stack.pop()
                for dep in derived.get(cur, ()):
                    if dep == start:
                        self.add("error", start, f"{start}: derived field depends on itself", "expr_cycle")
                        stack = []
                        break
                    if dep not in seen:
                        seen.add(dep)
                        stack.append(dep)

    def _expr(self, obj_id: str, expr: str) -> set[str]:
        try:
            names = expression_names(expr)
        except ExprError as exc:
            self.add("error", obj_id, f"{obj_id}: {exc}", "expr_syntax")
            return set()
        for name in sorted(names - set(self.fields)):
            self.add("error", obj_id, f"{obj_id}: expression names unknown symbol {name!r}", "unknown_symbol")
        return names

    def references(self) -> None:
        preds, meths, bns, tiers = self.predicates, self.methods, self.bottlenecks, self.tiers
        for b in self.s.bottlenecks:
            self.refs(b.id, "signature predicate", b.signature, preds, "undefined_predicate")
            self.refs(b.id, "forced_by predicate", b.forced_by, preds, "undefined_predicate")
            self.refs(b.id, "metric field", b.metrics, self.fields, "undefined_field")
        for t in self.s.tiers:
            self.refs(t.id, "tier field", [t.field], self.fields, "undefined_field")
        for c in self.s.cases:
            if c.bottleneck is not None:
                self.refs(c.id, "bottleneck", [c.bottleneck], bns, "undefined_bottleneck")
            self.refs(c.id, "tier", c.tiers, tiers, "undefined_tier")
            self.refs(c.id, "predicate", [*c.when, *c.unless], preds, "undefined_predicate")
            self.refs(c.id, "method", c.methods, meths, "undefined_method")
        for v in self.s.vetoes:
            self.refs(v.id, "predicate", v.when, preds, "undefined_predicate")
            self.refs(v.id, "method", v.methods, meths, "undefined_method")
            known_tags = {t for m in self.s.methods for t in m.tags}
            self.refs(v.id, "tag (no method carries it)", v.tags, known_tags, "unknown_tag", "warning")
        for m in self.s.methods:
            self.refs(m.id, "required predicate", m.requires, preds, "undefined_predicate")
            self.refs(m.id, "bottleneck", m.bottlenecks, bns, "undefined_bottleneck")
            self.refs(m.id, "expected effect field", [e.field for e in m.expected_effects], self.fields,
                      "undefined_field")
            self._structures(m.id, m.structures)
        for d in self.s.docs:
            self.refs(d.id, "method", [d.method], meths, "undefined_method")
            self.refs(d.id, "bottleneck", d.bottlenecks, bns, "undefined_bottleneck")
            self.refs(d.id, "tier", d.tiers, tiers, "undefined_tier")
            self._structures(d.id, d.structures)

    def _structures(self, obj_id: str, values: list[int]) -> bool:
        domain = set(self.structures())
        bad = [s for s in values if s not in domain]
        for s in bad:
            self.add("error", obj_id, f"{obj_id}: structure {s} is outside the domain {sorted(domain)}",
                     "structure_domain")
        return not bad

    def cases_reachable(self) -> None:
        for c in self.s.cases:
            if not self._structures(c.id, c.structures):
                self.add("error", c.id, f"{c.id}: case can never match (structure outside the domain)", "never_matches")
            both = sorted(set(c.when) & set(c.unless))
            for p in both:
                self.add("error", c.id, f"{c.id}: predicate {p!r} is in both 'when' and 'unless': the case can "
                                        "never match", "never_matches")
            bad_symbols = [p for p in c.when if p in self.pred_names and self.pred_names[p] - set(self.fields)]
            for p in bad_symbols:
                self.add("error", c.id, f"{c.id}: 'when' predicate {p!r} names unknown symbols: the case can never "
                                        "match", "never_matches")
            self._contradictions(c.id, c.when, c.structures)
        for b in self.s.bottlenecks:
            self._contradictions(b.id, b.signature, [], what="bottleneck signature")

    def _contradictions(self, obj_id: str, pred_ids: list[str], structures: list[int],
                        what: str = "case") -> None:
        cons: dict[str, Constraint] = defaultdict(Constraint)
        for pid in pred_ids:
            p = self.predicates.get(pid)
            if p is None:
                continue
            for name, op, value in simple_constraints(p.expr):
                c = cons[name]
                _apply(c, op, value)
                c.sources.append(pid)
        if structures and STRUCTURE_FIELD in cons:
            cons[STRUCTURE_FIELD].restrict(set(structures))
            cons[STRUCTURE_FIELD].sources.append("structures")
        for name, c in cons.items():
            f = self.fields.get(name)
            if f is not None:
                if f.min is not None:
                    c.add_lo(f.min, True)
                if f.max is not None:
                    c.add_hi(f.max, True)
                if f.domain:
                    c.restrict(set(f.domain))
            if c.empty():
                srcs = ", ".join(dict.fromkeys(c.sources))
                self.add("error", obj_id, f"{obj_id}: {what} can never match: the conditions on {name!r} "
                                          f"({srcs}) contradict each other or the field's range", "never_matches")

    def tier_layout(self) -> None:
        by_field: dict[str, list] = defaultdict(list)
        for t in self.s.tiers:
            by_field[t.field].append(t)
        for fid, tiers in by_field.items():
            ordered = sorted(tiers, key=lambda t: (-math.inf if t.lower is None else t.lower,
                                                   math.inf if t.upper is None else t.upper))
            f = self.fields.get(fid)
            lo_bound = f.min if f is not None and f.min is not None else None
            hi_bound = f.max if f is not None and f.max is not None else None
            first, last = ordered[0], ordered[-1]
            if first.lower is not None and (lo_bound is None or first.lower > lo_bound):
                self.add("warning", first.id, f"tiers on {fid!r}: values below {first.lower:g} fall in no tier",
                         "tier_gap")
            if last.upper is not None and (hi_bound is None or last.upper <= hi_bound):
                self.add("warning", last.id, f"tiers on {fid!r}: values from {last.upper:g} up fall in no tier",
                         "tier_gap")
            for a, b in zip(ordered, ordered[1:], strict=False):
                a_hi = math.inf if a.upper is None else a.upper
                b_lo = -math.inf if b.lower is None else b.lower
                if a_hi > b_lo:
                    self.add("error", b.id, f"tiers {a.id!r} and {b.id!r} overlap on {fid!r}", "tier_overlap")
                elif a_hi < b_lo:
                    self.add("warning", b.id, f"tiers on {fid!r}: gap between {a_hi:g} and {b_lo:g}", "tier_gap")

    def unused(self) -> None:
        used: set[str] = set()
        for c in self.s.cases:
            used |= set(c.when) | set(c.unless)
        for v in self.s.vetoes:
            used |= set(v.when)
        for b in self.s.bottlenecks:
            used |= set(b.signature) | set(b.forced_by)
        for m in self.s.methods:
            used |= set(m.requires)
        for p in self.s.predicates:
            if p.id not in used:
                self.add("warning", p.id, f"{p.id}: predicate is never used", "unused_predicate")
        permitted = {m for c in self.s.cases for m in c.methods}
        for m in self.s.methods:
            if m.id not in permitted:
                self.add("warning", m.id, f"{m.id}: no case permits this method", "method_never_permitted")

    def backing(self) -> None:
        """Every method should carry a worked example and a measurement of it on the GPU."""
        for m in self.s.methods:
            if m.example is None:
                self.add("warning", m.id, f"{m.id}: method has no worked example", "method_without_example")
                continue
            measured = m.measurements()
            if not measured:
                self.add("warning", m.id, f"{m.id}: the worked example has no measured evidence "
                                          "(python benchmarks/kb_evidence.py on a GPU)", "method_unmeasured")
            for e in measured:
                if e.task and Path(e.task).as_posix() != Path(m.example.task).as_posix():
                    self.add("warning", m.id, f"{m.id}: evidence measured {e.task!r}, but the worked example "
                                              f"is {m.example.task!r}", "evidence_other_task")

    def coverage(self) -> list[CoverageRow]:
        structures = self.structures()
        tiers = sorted(self.s.tiers, key=lambda t: (t.order, t.id))
        tier_ids = [t.id for t in tiers] or ["any"]
        rows: list[CoverageRow] = []
        for b in sorted(self.s.bottlenecks, key=lambda b: (b.priority, b.id)):
            cases = [c for c in self.s.cases if c.bottleneck == b.id and not c.fallback]
            for tid in tier_ids:
                counts = {s: sum(1 for c in cases if (not c.tiers or tid in c.tiers)
                                 and (not c.structures or s in c.structures)) for s in structures}
                rows.append(CoverageRow(bottleneck=b.id, tier=tid, counts=counts))
                missing = [s for s, n in counts.items() if n == 0]
                if missing:
                    self.add("warning", b.id, f"coverage hole: bottleneck {b.id!r}, tier {tid!r}, structures "
                                              f"{missing} have no case (the fallback applies)", "coverage_hole")
        return rows


    # -- protocol coverage ----------------------------------------------------------------------
    def scenarios(self) -> list[Scenario]:
        return [Scenario(protocol=p, dtype=d, arch_sm=a, forward=f) for p in self.protocols
                for d in COVERAGE_DTYPES for a in COVERAGE_ARCHS for f in FORWARD_SHAPES]

    def scenario_env(self, sc: Scenario) -> dict[str, Any]:
        env = dict(self.protocols[sc.protocol].context(sc.dtype))
        env.update(task_dtype=sc.dtype, arch_sm=sc.arch_sm, **FORWARD_SHAPES[sc.forward])
        return env

    def _pred(self, pid: str, env: dict[str, Any]) -> bool | None:
        p = self.predicates.get(pid)
        if p is None:
            return None
        try:
            if pid not in self._compiled:
                self._compiled[pid] = compile_expr(p.expr)
            value = self._compiled[pid].evaluate(env)
        except ExprError:
            return None
        return None if value is None else bool(value)

    def _case_facts(self, case: Case) -> dict[str, Any]:
        """Field values the case's gates pin down: ``x``, ``not x``, ``x == v`` and one-value ``in`` atoms of
        its bottleneck's signature and its ``when`` predicates; a one-symbol ``unless`` predicate is false."""
        facts: dict[str, Any] = {}
        gates = list(case.when)
        b = self.bottlenecks.get(case.bottleneck or "")
        if b is not None:
            gates = [*b.signature, *gates]
        for pid in gates:
            p = self.predicates.get(pid)
            for name, op, value in simple_constraints(p.expr) if p is not None else []:
                if op in ("Eq", "=="):
                    facts[name] = value
                elif op == "in" and len(value) == 1:
                    facts[name] = next(iter(value))
        for pid in case.unless:
            p = self.predicates.get(pid)
            atoms = simple_constraints(p.expr) if p is not None else []
            if len(atoms) == 1 and atoms[0][1] in ("Eq", "==") and isinstance(atoms[0][2], bool):
                facts[atoms[0][0]] = not atoms[0][2]
        return facts

    def case_under(self, case: Case, structure: int, env: dict[str, Any]) -> tuple[list[str], dict[str, str]] | None:
        """``(permitted, removed)`` for ``case`` in a scenario (``env``) and structure, or None when the case
        cannot be chosen there. The scenario's own values win over the case's facts; a gate that is false
        under them makes the case unreachable. Vetoes and ``requires`` are evaluated as the query engine does
        (three-valued: a condition that stays unknown removes nothing)."""
        if case.id not in self._facts:
            self._facts[case.id] = self._case_facts(case)
        full = {**self._facts[case.id], **env, STRUCTURE_FIELD: structure}
        b = self.bottlenecks.get(case.bottleneck or "")
        gates = [*(b.signature if b is not None else []), *case.when]
        if any(self._pred(p, full) is False for p in gates) or any(self._pred(p, full) is True for p in case.unless):
            return None
        active = [v for v in self.s.vetoes if "query" in v.scope and (v.methods or v.tags)
                  and all(self._pred(p, full) is True for p in v.when)]
        permitted: list[str] = []
        removed: dict[str, str] = {}
        for mid in case.methods:
            m: Method | None = self.methods.get(mid)
            if m is None:
                removed[mid] = "not a method of this KB"
                continue
            veto = next((v for v in active if m.id in v.methods or set(m.tags) & set(v.tags)), None)
            failed = [r for r in m.requires if self._pred(r, full) is False]
            if veto is not None:
                removed[mid] = f"veto {veto.id}"
            elif failed:
                removed[mid] = f"requires {', '.join(failed)}"
            else:
                permitted.append(mid)
        return permitted, removed

    def protocol_coverage(self) -> list[ProtocolCell]:
        """For every scenario (protocol x dtype x arch x forward shape) and bottleneck x tier x structure cell,
        each case that can be chosen there must keep at least MIN_PERMITTED methods after the vetoes; a case
        that does not is a dead end (an error naming the case and the scenarios where it happens)."""
        structures = self.structures()
        tier_ids = [t.id for t in sorted(self.s.tiers, key=lambda t: (t.order, t.id))] or ["any"]
        rows = [(b.id, False) for b in sorted(self.s.bottlenecks, key=lambda b: (b.priority, b.id))]
        rows.append((FALLBACK_ROW, True))
        cells: list[ProtocolCell] = []
        dead: dict[str, list[tuple[Scenario, int, list[str], dict[str, str]]]] = defaultdict(list)
        for sc in self.scenarios():
            env = self.scenario_env(sc)
            memo: dict[tuple[str, int], tuple[list[str], dict[str, str]] | None] = {}
            for row, fallback in rows:
                cases = [c for c in self.s.cases if c.fallback == fallback and (fallback or c.bottleneck == row)]
                for tid in tier_ids:
                    for s in structures:
                        permitted: dict[str, int] = {}
                        for c in cases:
                            if (c.tiers and tid not in c.tiers) or (c.structures and s not in c.structures):
                                continue
                            if (c.id, s) not in memo:
                                memo[(c.id, s)] = self.case_under(c, s, env)
                                got = memo[(c.id, s)]
                                if got is not None and len(got[0]) < MIN_PERMITTED:
                                    dead[c.id].append((sc, s, *got))
                            got = memo[(c.id, s)]
                            if got is not None:
                                permitted[c.id] = len(got[0])
                        cells.append(ProtocolCell(scenario=sc, bottleneck=row, tier=tid, structure=s,
                                                  permitted=permitted))
        for cid, hits in dead.items():
            cut = [h for h in hits if h[3]]
            if not cut:  # the case lists too few methods itself, whatever the protocol
                self.add("warning", cid, f"{cid}: the case lists {len(hits[0][2])} method(s); a case should offer "
                                         f"at least {MIN_PERMITTED}", "thin_case")
                continue
            sc, s, kept, removed = cut[0]
            where = sorted({h[0].label() for h in cut})
            more = f" and {len(where) - 1} more scenario(s)" if len(where) > 1 else ""
            gone = ", ".join(f"{m} ({why})" for m, why in removed.items())
            self.add("error", cid, f"dead end: case {cid!r} can be chosen under {sc.label()}{more}, structure "
                                   f"{s}, and keeps {len(kept)} method(s) after the vetoes "
                                   f"({', '.join(kept) or 'none'}; removed: {gone}); it needs at least "
                                   f"{MIN_PERMITTED} permitted methods in every scenario", "dead_end")
        return cells


def lint(skills: SkillSet, load_issues: list[LoadIssue] | None = None,
         protocols: dict[str, Protocol] | None = None) -> LintReport:
    """Run every check; ``load_issues`` (from the loader) become error findings first. ``protocols`` (default:
    the presets of :mod:`kernelskill.protocols`) are the protocol dimension of the coverage."""
    report = _Linter(skills, protocols).run()
    if load_issues:
        extra = [Finding(severity="error", file=i.location.file, line=i.location.line, message=i.message,
                         code=i.code) for i in load_issues]
        report.findings[:0] = extra
    return report
