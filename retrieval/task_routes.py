"""The KB's advice for a task with no kernel yet: the routes it puts first for each op family of the forward.

A KernelBench task file holds only the PyTorch reference (``class Model``). Before any kernel exists the
question is which route to take for each operation the forward runs (a GEMM through the library or a
compensated-TF32 kernel, a softmax in one pass, ...), under the run's protocol. The op families come from
``Model.forward`` (``task_families.yaml``, read with :mod:`ast`, never imported); each family is decided by
the ordinary rule engine over a context that says "task only" (``has_kernel`` false, ``task_family``) with
the family's typical work features (``kernel_ops.yaml`` ``vendor_features``), so the task-route cases of the
KB answer (never a fallback case written for kernel code) and the protocol's vetoes remove what it forbids.
"""

from __future__ import annotations

import ast
import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from kernelskill.errors import KernelskillError
from kernelskill.yaml_load import safe_load

from .engine import Decision, Rules, decide, structure_of
from .kernels import load_kernel_ops, task_calls
from .ranking import rank_methods
from .result import ForbiddenMethod, PermittedMethod, RouteReport, TraceStep
from .routes import route_report

log = logging.getLogger(__name__)

FAMILIES_PATH = Path(__file__).with_name("task_families.yaml")
FAMILY_NAMES = ("gemm", "conv", "attention", "softmax", "normalization", "reduction", "scan", "pooling",
                "elementwise")


@dataclass(frozen=True)
class FamilySpec:
    family: str
    op: str
    op_family: str | None
    calls: frozenset[str]


@functools.cache
def load_task_families(path: Path = FAMILIES_PATH) -> tuple[FamilySpec, ...]:
    """The parsed ``task_families.yaml`` (in order of dominance)."""
    try:
        data = safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KernelskillError(f"{path}: cannot read the task families: {exc}") from exc
    ops = load_kernel_ops().ops
    out: list[FamilySpec] = []
    for i, row in enumerate(data.get("families") or [], start=1):
        fam, op = row.get("family"), row.get("op")
        if fam not in FAMILY_NAMES:
            raise KernelskillError(f"{path}: families[{i}]: family {fam!r} is not one of {list(FAMILY_NAMES)}")
        if op not in ops:
            raise KernelskillError(f"{path}: families[{i}] ({fam}): op {op!r} is not one of {list(ops)}")
        out.append(FamilySpec(family=fam, op=op, op_family=row.get("op_family"),
                              calls=frozenset(str(c).lower() for c in row.get("calls") or [])))
    return tuple(out)


def is_task_only(source: str) -> bool:
    """A PyTorch reference with no kernel: defines ``class Model`` and neither ``ModelNew`` nor kernel code."""
    if "__global__" in source or "triton.jit" in source or "load_inline" in source:
        return False
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    return "Model" in classes and "ModelNew" not in classes


def forward_families(task: str | Path) -> list[tuple[FamilySpec, list[tuple[str, int]]]]:
    """The op families ``Model.forward`` runs, in order of dominance, each with its calls (name, line)."""
    calls = task_calls(task)
    out = []
    for spec in load_task_families():
        mine = [(name, line) for name, line in calls if name in spec.calls]
        if mine:
            out.append((spec, mine))
    return out


def family_env(spec: FamilySpec, context: Mapping[str, Any], *, calls_in_forward: int) -> dict[str, Any]:
    """The rule environment for advising on ``spec`` in a task with no kernel: the family's typical work
    features, the query context (protocol, dtype, op hints) and the task-only markers."""
    feats = dict(load_kernel_ops().vendor_features.get(spec.op, {}))
    feats["has_multiple_kernels_in_forward"] = calls_in_forward > 1
    if calls_in_forward > 1:
        feats["kernel_structure_id"] = 4
    env = {**feats, **context, "has_profile": False, "has_kernel": False, "task_family": spec.family,
           "dominant_op": spec.op}
    if spec.op_family:
        env["op_family"] = spec.op_family
    else:
        env.pop("op_family", None)
    return env


class FamilyAdvice(BaseModel):
    """The KB's advice for one op family of the forward."""

    model_config = ConfigDict(extra="forbid")

    family: str
    calls: list[str] = Field(default_factory=list)  # "linear (line 12)"
    dominant: bool = False  # the family that dominates the forward (advised on first)
    case: str | None = None
    title: str | None = None
    rationale: str | None = None
    routes: list[PermittedMethod] = Field(default_factory=list)  # what the KB puts first, in order
    forbidden: list[ForbiddenMethod] = Field(default_factory=list)  # removed by the protocol's vetoes
    ceilings: RouteReport | None = None  # the family's routes with their speed-of-light ceilings for this task
    trace: list[TraceStep] = Field(default_factory=list)


class TaskAdvice(BaseModel):
    """``retrieval.api.task_advice``: the KB's advice for a task's operations (docs/CONTRACTS.md)."""

    model_config = ConfigDict(extra="forbid")

    task: str
    protocol: str | None = None
    dtype: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    families: list[FamilyAdvice] = Field(default_factory=list)  # dominant first
    notes: list[str] = Field(default_factory=list)

    def first_routes(self, n: int = 3) -> dict[str, list[str]]:
        """Family -> the ids of its first ``n`` routes."""
        return {f.family: [r.id for r in f.routes[:n]] for f in self.families}


def decide_family(store: Any, rules: Rules, spec: FamilySpec, context: Mapping[str, Any], *,
                  calls_in_forward: int) -> tuple[Decision, dict[str, Any]]:
    env = family_env(spec, context, calls_in_forward=calls_in_forward)
    why = {"has_profile": "a task with no kernel has no profile"}
    return decide(store, env, structure=structure_of(env), rules=rules, why_missing=why), env


def advise(store: Any, rules: Rules, task: str | Path, context: Mapping[str, Any], *, k: int = 1) -> TaskAdvice:
    """Decide every op family of ``task``'s forward (``context``: protocol, dtype, op hints)."""
    found = forward_families(task)
    n_calls = sum(len(c) for _, c in found)
    out = TaskAdvice(task=str(task), protocol=context.get("protocol"), dtype=context.get("task_dtype"),
                     context=dict(context))
    if not found:
        out.notes.append(f"{task}: no op-family rule recognises the calls of Model.forward "
                         f"(retrieval/task_families.yaml); no family advice")
    all_methods = {m.id: m for m in store.methods()} if found else {}
    for i, (spec, calls) in enumerate(found):
        decision, env = decide_family(store, rules, spec, context, calls_in_forward=n_calls)
        routes = rank_methods(store, decision.permitted, "", case_id=decision.case.id, k=k) \
            if decision.permitted else []
        out.families.append(FamilyAdvice(
            family=spec.family, calls=[f"{name} (line {line})" for name, line in calls], dominant=i == 0,
            case=decision.case.id, title=decision.case.title, rationale=decision.case.rationale, routes=routes,
            forbidden=decision.forbidden, trace=decision.trace,
            ceilings=route_report(op=spec.op, kernel=None, env=decision.env, rules=rules, methods=all_methods,
                                  task=task, forward_ms=None, vendor=False, applied=set()) if i == 0 else None))
    return out
