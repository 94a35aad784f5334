"""Per-kernel diagnosis: what each kernel of a forward computes, its share of the time, its own tier and
bottleneck, and which kernel the case and methods are chosen for.

A forward is rarely one kernel: a GEMM followed by a bias/activation/normalisation kernel, attention
written as projections, scores, softmax and P @ V. The knowledge that applies is the knowledge for the
kernel that takes the time, so the query decides per kernel (the operation from the kernel's name for
vendor kernels, from its own code and the task's forward for custom ones; tier and bottleneck from its
own counters with the KB's rules) and gates the case on the dominant kernel's work, not on the union of
every kernel's features. The classification rules are data (``kernel_ops.yaml``).
"""

from __future__ import annotations

import ast
import functools
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kernelskill.errors import KernelskillError
from kernelskill.expr import ExprError, compile_expr
from kernelskill.taskfile import parse_task
from kernelskill.yaml_load import safe_load

from .engine import PredicateEvaluator, Rules, decide_tier, derive, rank_bottlenecks
from .op_hints import _calls
from .result import KernelDiagnosis, TraceStep

log = logging.getLogger(__name__)

RULES_PATH = Path(__file__).with_name("kernel_ops.yaml")
_CONTAINERS = {"sequential", "modulelist", "moduledict"}


@dataclass(frozen=True, eq=False)  # hashed by identity (load_kernel_ops is cached)
class KernelOps:
    """The parsed ``kernel_ops.yaml``."""

    ops: tuple[str, ...]
    names: list[tuple[str, re.Pattern[str]]]
    source: list[dict[str, Any]]
    dominance: list[tuple[str, frozenset[str]]]
    kernel_features: tuple[str, ...]
    vendor_features: dict[str, dict[str, Any]]


@functools.cache
def load_kernel_ops(path: Path = RULES_PATH) -> KernelOps:
    try:
        data = safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise KernelskillError(f"{path}: cannot read the kernel-op rules: {exc}") from exc
    ops = tuple(data.get("ops") or ())
    names: list[tuple[str, re.Pattern[str]]] = []
    for group in data.get("names") or []:
        op = group.get("op")
        if op not in ops:
            raise KernelskillError(f"{path}: names: op {op!r} is not one of {list(ops)}")
        try:
            names.append((op, re.compile("|".join(f"(?:{p})" for p in group.get("patterns", [])), re.IGNORECASE)))
        except re.error as exc:
            raise KernelskillError(f"{path}: names of {op}: not a valid regex: {exc}") from exc
    source = list(data.get("source") or [])
    for rule in source:
        if rule.get("op") not in ops:
            raise KernelskillError(f"{path}: source rule op {rule.get('op')!r} is not one of {list(ops)}")
        if rule.get("when"):
            try:
                compile_expr(rule["when"])
            except ExprError as exc:
                raise KernelskillError(f"{path}: source rule {rule['op']}: {exc}") from exc
    dominance = [(g["op"], frozenset(str(c).lower() for c in g.get("calls", []))) for g in data.get("dominance") or []]
    for op, _ in dominance:
        if op not in ops:
            raise KernelskillError(f"{path}: dominance op {op!r} is not one of {list(ops)}")
    vendor = {k: dict(v or {}) for k, v in (data.get("vendor_features") or {}).items()}
    return KernelOps(ops=ops, names=names, source=source, dominance=dominance,
                     kernel_features=tuple(data.get("kernel_features") or ()), vendor_features=vendor)


# --------------------------------------------------------------------------------------- operations
def op_from_name(name: str, rules: KernelOps | None = None) -> tuple[str, str] | None:
    """The operation a kernel's name says it implements (``ampere_sgemm_128x64_nn`` -> gemm), or None."""
    rules = rules or load_kernel_ops()
    for op, rx in rules.names:
        m = rx.search(name)
        if m is not None:
            return op, f"its name matches {m.group(0)!r}"
    return None


def op_from_code(features: Mapping[str, Any], family: str | None, family_evidence: str,
                 rules: KernelOps | None = None) -> tuple[str, str] | None:
    """The operation a custom kernel implements, from its own features and op family (kernel_ops.yaml)."""
    rules = rules or load_kernel_ops()
    for rule in rules.source:
        fams = rule.get("family")
        if fams and family not in fams:
            continue
        if rule.get("when"):
            expr = compile_expr(rule["when"])
            if expr.evaluate(features) is not True:
                continue
            shown = {k: v for k, v in expr.inputs(features).items()}
            return rule["op"], f"its code: {rule['when']} ({', '.join(f'{k}={v}' for k, v in shown.items())})"
        return rule["op"], f"its body: op family {family} ({family_evidence})"
    return None


def task_calls(task: str | Path) -> list[tuple[str, int]]:
    """Lower-case names of the torch calls and modules ``Model.forward`` runs, with their lines. A forward
    that runs a container (``nn.Sequential`` built in a loop) counts every module ``__init__`` builds."""
    _, tree = parse_task(Path(task))
    calls = [(name, call.lineno) for name, call in _calls(tree)]
    if not calls or any(name in _CONTAINERS for name, _ in calls):
        for cls in tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name == "Model":
                for node in ast.walk(cls):
                    if isinstance(node, ast.Call):
                        func = node.func
                        short = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                        if short[:1].isupper():
                            calls.append((short.lower(), node.lineno))
    return calls


def dominant_op_of_task(task: str | Path, rules: KernelOps | None = None) -> tuple[str, str] | None:
    """Without a profile: the op that dominates the task's forward (a GEMM/conv over its epilogues)."""
    rules = rules or load_kernel_ops()
    calls = task_calls(task)
    for op, wanted in rules.dominance:
        hit = next(((n, line) for n, line in calls if n in wanted), None)
        if hit is not None:
            return op, f"{Path(task).name}:{hit[1]}: Model.forward runs {hit[0]} (the {op} dominates its epilogues)"
    return None


# ----------------------------------------------------------------------------------- the diagnosis
@dataclass
class KernelView:
    """One kernel as the rules see it: its op, its own features and (profiled) its own counters."""

    name: str
    op: str
    op_reason: str
    features: dict[str, Any] = field(default_factory=dict)  # the 18 features of this kernel alone
    fields: dict[str, Any] = field(default_factory=dict)  # its normalized profile fields
    in_source: bool = False
    vendor: bool = False
    share_pct: float | None = None
    diagnosis: KernelDiagnosis | None = None


@functools.lru_cache(maxsize=128)
def _per_kernel_features(source: str, path: str) -> dict[str, dict[str, Any]]:
    from kernelskill.feature_rules import kernel_features

    try:
        return kernel_features(source, path=path)
    except KernelskillError as exc:  # a source the scanner cannot read per kernel: no per-kernel view
        log.info("%s: no per-kernel features: %s", path, exc)
        return {}


def source_kernels(source: str, path: str, task: str | Path | None,
                   rules: KernelOps | None = None) -> dict[str, KernelView]:
    """The custom kernels of ``source`` with their own features and operation."""
    from .op_hints import kernel_families

    rules = rules or load_kernel_ops()
    feats = _per_kernel_features(source, path)
    families = kernel_families(source)
    task_ops = {n for n, _ in task_calls(task)} if task is not None else set()
    conv_calls = next((w for op, w in rules.dominance if op == "conv"), frozenset())
    gemm_calls = next((w for op, w in rules.dominance if op == "gemm"), frozenset())
    out: dict[str, KernelView] = {}
    for name, values in feats.items():
        family, fam_ev = families.get(name, (None, ""))
        decided = op_from_code(values, family, fam_ev, rules) or op_from_name(name, rules)
        op, why = decided or ("other", "neither its code nor its name matches an operation rule")
        if op == "gemm" and task_ops & conv_calls and not task_ops & gemm_calls:
            op, why = "conv", f"{why}; the task's forward convolves and multiplies no matrices (a conv as GEMM)"
        out[name] = KernelView(name=name, op=op, op_reason=why, features=dict(values), in_source=True)
    return out


def diagnose(profile: Any, views: Mapping[str, KernelView], union_features: Mapping[str, Any],
             context: Mapping[str, Any], rules: Rules, ops: KernelOps | None = None) -> list[KernelView]:
    """Every profiled kernel, by share of time (largest first), with its op and its own tier and bottleneck.

    ``views`` are the source's kernels (:func:`source_kernels`); ``rules`` is the engine's ``Rules``."""
    ops = ops or load_kernel_ops()
    kernels = sorted(profile.kernels, key=lambda k: (-(k.total_duration_ns or 0.0), min(k.ids or [0])))
    total = sum(k.total_duration_ns or 0.0 for k in kernels)
    dominant = profile.dominant()
    out: list[KernelView] = []
    for k in kernels:
        own = views.get(k.base_name)
        if own is not None:
            view = KernelView(name=k.base_name, op=own.op, op_reason=own.op_reason, features=dict(own.features),
                              in_source=True)
        else:
            by_name = op_from_name(k.name, ops)
            op, why = by_name or ("other", "not in the source and its name matches no operation rule")
            view = KernelView(name=k.base_name, op=op, op_reason=why, features={**union_features,
                              **ops.vendor_features.get(op, {})})
        view.vendor = k.vendor and own is None
        view.fields = {f: v for f, v in k.fields.items() if v is not None}
        view.share_pct = round(100.0 * (k.total_duration_ns or 0.0) / total, 2) if total else None
        tier, bott, metrics = _own_verdict(view, context, rules)
        view.diagnosis = KernelDiagnosis(
            name=k.base_name, full_name=k.name, launches=k.launches, time_ns=k.total_duration_ns,
            share_pct=view.share_pct, vendor=view.vendor, in_source=view.in_source, op=view.op,
            op_reason=view.op_reason, tier=tier.name, tier_id=tier.id, tier_reason=tier.reason,
            bottleneck=bott.id if bott else None, bottleneck_name=bott.name if bott else None,
            bottleneck_reason=_bottleneck_reason(bott, rules), metrics=metrics, dominant=k is dominant)
        out.append(view)
    return out


def static_views(views: Mapping[str, KernelView]) -> list[KernelDiagnosis]:
    """The source's kernels without a profile: their operation only (no time, tier or bottleneck)."""
    return [KernelDiagnosis(name=v.name, full_name=v.name, in_source=True, op=v.op, op_reason=v.op_reason,
                            tier="unknown", tier_reason="no profile")
            for v in views.values()]


def kernel_env(view: KernelView, union_features: Mapping[str, Any], context: Mapping[str, Any],
               ops: KernelOps | None = None) -> dict[str, Any]:
    """The rule environment for deciding a case for ``view``: the forward's features with the work
    features (``kernel_features`` in kernel_ops.yaml) taken from this kernel, the context and the
    kernel's own counters."""
    ops = ops or load_kernel_ops()
    feats = dict(union_features)
    for name in ops.kernel_features:
        if name in view.features:
            feats[name] = view.features[name]
    return {**feats, **context, **view.fields}


def _own_verdict(view: KernelView, context: Mapping[str, Any], rules: Rules) -> tuple[Any, Any, dict[str, Any]]:
    env: dict[str, Any] = {**view.features, **context, **view.fields, "has_profile": True,
                           "vendor_kernel_dominant": False}
    env.pop("dominant_kernel_share_pct", None)
    scratch: list[TraceStep] = []
    derive(env, rules.fields, scratch)
    tier = decide_tier(env, rules, scratch, {})
    cands = rank_bottlenecks(PredicateEvaluator(env, rules.predicates, scratch), rules, scratch)
    chosen = next((c for c in cands if c.considered), None)
    wanted: list[str] = [tier.field] if tier.field else []
    if chosen is not None:
        b = next((b for b in rules.bottlenecks if b.id == chosen.id), None)
        wanted += list(b.metrics) if b is not None else []
    metrics = {m: _round(env.get(m)) for m in dict.fromkeys(wanted) if env.get(m) is not None}
    return tier, chosen, metrics


def _bottleneck_reason(cand: Any, rules: Any) -> str:
    if cand is None:
        return "no bottleneck signature holds on its counters"
    if cand.forced_by:
        return f"forced by {', '.join(cand.forced_by)}"
    sig = next((b.signature for b in rules.bottlenecks if b.id == cand.id), [])
    return f"signature {' and '.join(sig)} holds"


def _round(v: Any) -> Any:
    return round(v, 4) if isinstance(v, float) else v


def target_note(chosen: KernelView, skipped: list[tuple[KernelView, str]]) -> TraceStep:
    """The trace step that says which kernel the case was chosen for, and why others were passed over."""
    why = "; ".join(f"{v.name} ({v.op}, {v.share_pct}%): {reason}" for v, reason in skipped)
    note = (f"case chosen for {chosen.name} ({chosen.op}"
            + (f", {chosen.share_pct}% of the time" if chosen.share_pct is not None else "") + ")"
            + (f" after {why}" if why else ""))
    return TraceStep(kind="note", id="target_kernel", value=chosen.name, note=note)
