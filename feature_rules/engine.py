"""Load the declarative rules and apply them to a scanned source."""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from kernelskill.errors import KernelskillError

from .forward import ForwardInfo, analyse_forward
from .kernel_facts import Facts, cuda_facts, triton_facts
from .models import EvidenceLine, FeatureSet
from .rule_expr import RuleSyntaxError, compile_rule, evaluate_rule, names_in
from .scanner import Function, Source, scan

#: bump when the extraction code changes meaning; the rule-set version hashes it with rules.yaml
ENGINE_VERSION = "1"
FORWARD_FACTS = {"launches", "custom_launches", "library_gemm", "library_conv", "library_attention",
                 "library_reduce", "library_gather", "library_other", "host_sync", "dynamic_shape", "side_stream", "kernel_count",
                 "forward_found", "value"}
MAX_EVIDENCE = 6


@dataclass
class Pattern:
    name: str
    regex: re.Pattern[str]
    view: str
    on: str


@dataclass
class FeatureRule:
    name: str
    scope: str
    description: str
    value: ast.expr | None = None
    combine: str = "any"
    cases: list[tuple[ast.expr, int]] = field(default_factory=list)
    default: Any = False
    undecided_when: ast.expr | None = None


@dataclass
class RuleSet:
    patterns: list[Pattern]
    derived: dict[str, ast.expr]
    structural: set[str]
    features: list[FeatureRule]
    version: str
    order: list[FeatureRule] = field(default_factory=list)


def _rules_path() -> Path:
    return Path(str(resources.files("kernelskill.feature_rules").joinpath("rules.yaml")))


def load_rules(path: Path | None = None) -> RuleSet:
    path = path or _rules_path()
    raw = path.read_bytes()
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise KernelskillError(f"{path}: invalid YAML: {exc}") from exc
    version = hashlib.sha256(raw + ENGINE_VERSION.encode()).hexdigest()[:16]
    try:
        return _build(data, path, version)
    except (RuleSyntaxError, re.error, KeyError, TypeError) as exc:
        raise KernelskillError(f"{path}: {exc}") from exc


def _build(data: dict, path: Path, version: str) -> RuleSet:
    structural = set(data.get("structural", []))
    patterns = []
    for name, spec in (data.get("patterns") or {}).items():
        patterns.append(Pattern(name=name, regex=re.compile(spec["regex"]), view=spec.get("view", "code"),
                                on=spec.get("applies_to", "cuda")))
    known = structural | {p.name for p in patterns}
    derived: dict[str, ast.expr] = {}
    for name, text in (data.get("derived") or {}).items():
        tree = compile_rule(text, f"derived.{name}")
        unknown = names_in(tree) - known
        if unknown:
            raise RuleSyntaxError(f"derived.{name}: unknown facts {sorted(unknown)}")
        derived[name] = tree
        known.add(name)
    from kernelskill.kb.schema import FEATURE_NAMES

    features = []
    done: set[str] = set()
    all_features = {spec.get("name") for spec in data.get("features") or []}
    for i, spec in enumerate(data.get("features") or []):
        where = f"features[{i}] ({spec.get('name')})"
        rule = FeatureRule(name=spec["name"], scope=spec["scope"], description=spec.get("description", ""),
                           combine=spec.get("combine", "any"), default=spec.get("default", False))
        if rule.scope not in ("kernels", "forward"):
            raise RuleSyntaxError(f"{where}: scope must be kernels or forward")
        allowed = known if rule.scope == "kernels" else known | FORWARD_FACTS | (all_features - {rule.name})
        exprs = []
        if "value" in spec:
            rule.value = compile_rule(spec["value"], where)
            exprs.append(rule.value)
        for case in spec.get("cases", []):
            tree = compile_rule(case["when"], where)
            rule.cases.append((tree, int(case["value"])))
            exprs.append(tree)
        if "undecided_when" in spec:
            rule.undecided_when = compile_rule(spec["undecided_when"], where)
            exprs.append(rule.undecided_when)
        for tree in exprs:
            unknown = names_in(tree) - allowed
            if unknown:
                raise RuleSyntaxError(f"{where}: unknown names {sorted(unknown)}")
        features.append(rule)
        done.add(rule.name)
    missing = set(FEATURE_NAMES) - done
    if missing:
        raise RuleSyntaxError(f"no rule for features {sorted(missing)}")
    return RuleSet(patterns=patterns, derived=derived, structural=structural, features=features, version=version,
                   order=_evaluation_order(features))


@functools.lru_cache(maxsize=1)
def default_rules() -> RuleSet:
    return load_rules()


# ---------------------------------------------------------------------------------------- facts
def _called_helpers(src: Source, fn: Function, seen: set[str] | None = None) -> list[Function]:
    seen = seen if seen is not None else {fn.name}
    body = src.cuda[fn.body_start : fn.end]
    out = []
    for dev in src.device_functions:
        if dev.name not in seen and re.search(r"\b" + re.escape(dev.name) + r"\s*[(<]", body):
            seen.add(dev.name)
            out.append(dev)
            out.extend(_called_helpers(src, dev, seen))
    return out


def _macro_text(src: Source, body: str) -> list[tuple[int, str]]:
    """#define lines whose macro name the body uses (so SIGMOID(x) macros count as kernel code)."""
    out = []
    for m in re.finditer(r"^[ \t]*#define\s+([A-Za-z_]\w*)\s*\(?.*$", src.cuda, re.M):
        if re.search(r"\b" + re.escape(m.group(1)) + r"\b", body):
            out.append((m.start(), m.group(0)))
    return out


def kernel_fact_table(src: Source, rules: RuleSet, fn: Function) -> Facts:
    parts = [fn] + (_called_helpers(src, fn) if fn.kind == "global" else [])
    facts: Facts = {}
    for part in parts:
        found = triton_facts(src, part) if part.kind == "triton" else cuda_facts(src, part)
        for k, v in found.items():
            facts.setdefault(k, []).extend(v)
        view_code = src.python if part.kind == "triton" else src.cuda
        regions = [(part.body_start, view_code[part.body_start : part.end])]
        if part.kind != "triton":
            regions += _macro_text(src, view_code[part.body_start : part.end])
            regions.append((part.start, view_code[part.start : part.body_start]))  # parameter list
        for pat in rules.patterns:
            if pat.on != "both" and (pat.on == "triton") != (part.kind == "triton"):
                continue
            if pat.view == "name":
                if part is fn and pat.regex.search(fn.name):
                    facts.setdefault(pat.name, []).append(fn.start)
                continue
            if pat.view == "asm":
                text = src.asm[part.body_start : part.end]
                facts.setdefault(pat.name, []).extend(part.body_start + m.start() for m in pat.regex.finditer(text))
                continue
            for base, text in regions:
                facts.setdefault(pat.name, []).extend(base + m.start() for m in pat.regex.finditer(text))
    facts = {k: v for k, v in facts.items() if v}
    for name, tree in rules.derived.items():
        used = names_in(tree)
        if evaluate_rule(tree, lambda n: bool(facts.get(n))):
            facts[name] = sorted({o for n in used if facts.get(n) and n != name for o in facts[n]})[:MAX_EVIDENCE] or [fn.start]
    return facts


def _forward_facts(info: ForwardInfo, src: Source) -> dict[str, Any]:
    return {
        "launches": info.launches,
        "custom_launches": sum(e.count for e in info.events if e.kind == "custom"),
        "library_gemm": bool(info.library("gemm")),
        "library_conv": bool(info.library("conv")),
        "library_attention": bool(info.library("attention")),
        "library_reduce": bool(info.library("reduce")),
        "library_gather": bool(info.library("gather")),
        "library_other": bool(info.library("other")),
        "host_sync": bool(info.sync),
        "dynamic_shape": bool(info.dynamic),
        "side_stream": bool(info.side_stream),
        "kernel_count": len(src.kernels),
        "forward_found": info.found_forward,
    }


def _forward_evidence(info: ForwardInfo) -> dict[str, list[int]]:
    return {
        "launches": [e.offset for e in info.events],
        "custom_launches": [e.offset for e in info.events if e.kind == "custom"],
        "library_gemm": info.library("gemm"),
        "library_conv": info.library("conv"),
        "library_attention": info.library("attention"),
        "library_reduce": info.library("reduce"),
        "library_gather": info.library("gather"),
        "library_other": info.library("other"),
        "host_sync": info.sync,
        "dynamic_shape": info.dynamic,
        "side_stream": info.side_stream,
    }


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def apply_rules(text: str, path: str | None = None, rules: RuleSet | None = None, *,
                as_kernel: str | None = None) -> FeatureSet:
    """The 18 features of ``text``; with ``as_kernel``, of that one kernel as if the forward launched it
    alone (once, no library call): what the kernel computes on its own, for a per-kernel diagnosis."""
    rules = rules or default_rules()
    src = scan(text, path)
    kernels = [k for k in src.kernels if as_kernel is None or k.name == as_kernel]
    if as_kernel is not None and not kernels:
        raise KernelskillError(f"{path or '<source>'}: no kernel named {as_kernel!r}")
    ktables = {k.name: kernel_fact_table(src, rules, k) for k in kernels}
    info = analyse_forward(src)
    launched_names = [n for n in info.custom_kernels() if n in ktables] or list(ktables)
    fwd = _forward_facts(info, src)
    if as_kernel is not None:
        fwd.update({k: False for k in fwd if k.startswith("library_")},
                   launches=1, custom_launches=1, kernel_count=1)
    fwd_ev = _forward_evidence(info)
    values: dict[str, bool | int] = {}
    evidence: dict[str, list[tuple[int, str]]] = {}
    decided: dict[str, bool] = {}

    def agg(fn_name: str, fact: str) -> Any:
        hits = [n for n in launched_names if ktables[n].get(fact)]
        if fn_name == "any":
            return bool(hits)
        if fn_name == "all":
            return len(hits) == len(launched_names)
        return len(hits)

    for rule in rules.order:
        ev: list[tuple[int, str]] = []
        if rule.scope == "kernels":
            hits = []
            for name, table in ktables.items():
                assert rule.value is not None
                if evaluate_rule(rule.value, lambda n, t=table: bool(t.get(n))):
                    hits.append(name)
                    for n in names_in(rule.value):
                        ev += [(o, n) for o in table.get(n, [])]
            value: Any = bool(hits) if rule.combine == "any" else not hits
            ok = bool(kernels) or src.language == "python" and src.py_error is None
        else:
            def lookup(n: str, current: dict = values) -> Any:
                if n in fwd:
                    return fwd[n]
                return current[n]

            def collect(tree: ast.expr, ev: list[tuple[int, str]] = ev) -> None:
                for n in names_in(tree):
                    if n in fwd_ev and fwd.get(n):
                        ev.extend((o, n) for o in fwd_ev[n])
                for node in ast.walk(tree):
                    if isinstance(node, ast.Call):
                        fact = node.args[0].id
                        for kn in launched_names:
                            ev.extend((o, fact) for o in ktables[kn].get(fact, [])[:2])

            if rule.cases:
                value = rule.default
                for tree, case_value in rule.cases:
                    if evaluate_rule(tree, lookup, agg):
                        value = case_value
                        collect(tree)
                        break
            else:
                assert rule.value is not None
                value = bool(evaluate_rule(rule.value, lookup, agg))
                if value:
                    collect(rule.value)
            ok = info.found_forward or bool(kernels)
            if rule.undecided_when is not None:
                fwd["value"] = value
                if evaluate_rule(rule.undecided_when, lookup, agg):
                    ok = False
                del fwd["value"]
        values[rule.name] = value
        decided[rule.name] = bool(ok)
        evidence[rule.name] = ev
    order = [r.name for r in rules.features]
    values = {k: values[k] for k in order}
    return FeatureSet(
        values=values,
        evidence={k: _lines(src, v) for k, v in evidence.items()},
        decided=decided,
        source_hash=source_hash(text),
        ruleset_version=rules.version,
        kernels=[k.name for k in kernels],
        launches=[e.name + ("" if e.kind == "custom" else f" ({e.lib})") + (" x loop" if e.count > 1 else "")
                  for e in info.events],
    )


def _evaluation_order(features: list[FeatureRule]) -> list[FeatureRule]:
    """Kernel rules first, then forward rules once the features they name are known."""
    names = {r.name for r in features}
    done: set[str] = set()
    out: list[FeatureRule] = []
    pending = list(features)
    while pending:
        progressed = False
        for rule in list(pending):
            trees = [t for t in [rule.value, rule.undecided_when, *(c for c, _ in rule.cases)] if t is not None]
            needs = set().union(*(names_in(t) for t in trees)) & names - {rule.name}
            if needs <= done:
                out.append(rule)
                done.add(rule.name)
                pending.remove(rule)
                progressed = True
        if not progressed:
            raise KernelskillError(f"rules.yaml: circular feature references among {[r.name for r in pending]}")
    return out


def _lines(src: Source, hits: list[tuple[int, str]]) -> list[EvidenceLine]:
    seen: set[tuple[int, str]] = set()
    out: list[EvidenceLine] = []
    for offset, rule in sorted(hits):
        line = src.line_of(offset)
        if (line, rule) in seen:
            continue
        seen.add((line, rule))
        out.append(EvidenceLine(line=line, text=src.line_text(line)[:160], rule=rule))
        if len(out) >= MAX_EVIDENCE:
            break
    return out
