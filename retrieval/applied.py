"""Methods the queried kernel already applies (rules as data in ``applied_methods.yaml``).

A method whose sign is in the source (a pattern in the code with comments blanked, or an expression over the
query's features and context) is taken out of the permitted list and shown as applied with the line that
shows it, so the planner is not offered what the parent already does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kernelskill.errors import KernelskillError
from kernelskill.expr import ExprError, compile_expr
from kernelskill.yaml_load import safe_load

from .op_hints import _strip_comments
from .result import AppliedMethod

RULES_PATH = Path(__file__).with_name("applied_methods.yaml")


@dataclass(frozen=True)
class _Sign:
    method: str
    patterns: tuple[re.Pattern[str], ...]
    when: str | None


@functools.cache
def load_signs(path: Path = RULES_PATH) -> tuple[_Sign, ...]:
    try:
        data = safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KernelskillError(f"{path}: cannot read the applied-method signs: {exc}") from exc
    out = []
    for method, spec in (data.get("methods") or {}).items():
        spec = spec or {}
        try:
            pats = tuple(re.compile(p) for p in spec.get("patterns") or [])
        except re.error as exc:
            raise KernelskillError(f"{path}: {method}: a pattern is not a valid regex: {exc}") from exc
        when = spec.get("when")
        if when:
            try:
                compile_expr(when)
            except ExprError as exc:
                raise KernelskillError(f"{path}: {method}: when: {exc}") from exc
        if not pats and not when:
            raise KernelskillError(f"{path}: {method}: needs patterns or when")
        out.append(_Sign(method=method, patterns=pats, when=when))
    return tuple(out)


def applied_methods(source: str, env: Mapping[str, Any]) -> dict[str, AppliedMethod]:
    """Method id -> how the source shows it is applied (the first sign found)."""
    text = _strip_comments(source)
    found: dict[str, AppliedMethod] = {}
    for sign in load_signs():
        for rx in sign.patterns:
            m = rx.search(text)
            if m is not None:
                line = text.count("\n", 0, m.start()) + 1
                shown = source.splitlines()[line - 1].strip()[:120]
                found[sign.method] = AppliedMethod(id=sign.method, line=line, evidence=shown,
                                                   rule=f"pattern {rx.pattern}")
                break
        if sign.method in found or not sign.when:
            continue
        expr = compile_expr(sign.when)
        if expr.evaluate(env) is True:
            inputs = ", ".join(f"{k}={v}" for k, v in expr.inputs(env).items())
            found[sign.method] = AppliedMethod(id=sign.method, evidence=f"{sign.when} ({inputs})",
                                               rule=f"when {sign.when}")
    return found
