"""The curated decision logic in kb/skills : counts, references, tiers, expressions, vetoes and
reachability of every decision case.

The reachability check is a local search over realistic inputs (features that respect the labelling
convention of docs/features.md, profiles on the thresholds' both sides, context values) for an
input under which the workflow of docs/kb.md actually *selects* each case: its bottleneck is the first
candidate (or, for a fallback, no bottleneck is a candidate), no case before it in (priority, id) order
matches, and its own gates hold. Expressions are evaluated by the real evaluator (expr.py).
"""

from __future__ import annotations

import ast
import math
import random
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelskill.expr import compile_expr
from kernelskill.kb.schema import FEATURE_NAMES, SECTIONS, FieldKind

ROOT = Path(__file__).resolve().parents[1]
SKILLS = ROOT / "kb" / "skills"
MY_FILES = [
    SKILLS / "fields.yaml",
    SKILLS / "predicates.yaml",
    SKILLS / "tiers.yaml",
    SKILLS / "bottlenecks.yaml",
    SKILLS / "vetoes.yaml",
    *sorted((SKILLS / "cases").glob("*.yaml")),
]
VETO_TAGS = {"caching", "vectorization", "precision", "library", "tensor_core", "async_copy", "hopper_only",
             "error_compensation"}
REFERENCE_PROFILE_FIELDS = {
    "dram_throughput_pct", "l2_throughput_pct", "l1_throughput_pct", "sm_throughput_pct",
    "achieved_occupancy_pct", "registers_per_thread", "occ_limit_registers_blocks",
    "occ_limit_sharedmem_blocks", "occ_limit_warps_blocks", "kernel_duration_ns",
    "stall_long_scoreboard_ratio", "stall_short_scoreboard_ratio", "stall_no_instruction_ratio",
    "stall_not_selected_ratio", "branch_divergent_cnt", "branch_uniform_cnt", "pred_on_threads_per_inst",
    "warps_eligible_cnt",
}
CONTEXT_FIELDS = {"launches_per_forward", "task_dtype", "tolerance_atol", "tolerance_rtol",
                  "vendor_kernel_dominant", "has_profile", "arch_sm", "library_calls_allowed",
                  # op-family hints (retrieval/op_hints.py) and the profile's dominant-kernel share
                  "op_family", "op_is_gemv", "op_is_pool_nonoverlap", "op_softmax_online", "op_row_in_registers",
                  "op_is_serial_scan", "uses_global_atomics", "dominant_kernel_share_pct", "single_custom_launch",
                  "op_gathers_rows", "op_has_softmax", "op_has_norm", "op_branch_chain", "op_norm_foldable",
                  # the launches' grid against the SMs (retrieval/launch_grid.py, the route-ceiling devices)
                  "launch_grid_blocks", "device_sm_count",
                  # the per-kernel diagnosis (retrieval/kernels.py) and the protocol's TF32 setting
                  "dominant_op", "tf32_allowed",
                  # a task file with no kernel yet (retrieval/task_routes.py)
                  "has_kernel", "task_family"}
OP_FAMILIES = ["attention", "softmax", "norm", "rms_norm", "gemm", "gemv", "conv", "pool", "scan", "scatter",
               "gather", "reduction"]


@cache
def kb() -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {k: [] for k in SECTIONS}
    for path in MY_FILES:
        data = yaml.safe_load(path.read_text())
        for section, items in data.items():
            out[section].extend(SECTIONS[section].model_validate(item) for item in items)
    return out


def contract_method_ids() -> set[str]:
    text = (ROOT / "docs" / "CONTRACTS.md").read_text()
    body = text.split("## Method ids", 1)[1].split("\n", 1)[1].split("Method tags", 1)[0]
    return {m.strip().rstrip(".") for m in re.split(r"[,\s]+", body) if m.strip().rstrip(".")}


# ------------------------------------------------------------------------------------------ counts, refs


def test_counts_meet_the_issue() -> None:
    k = kb()
    assert len(k["predicates"]) >= 31
    assert len(k["cases"]) >= 60
    assert len(k["bottlenecks"]) >= 9
    assert len(k["tiers"]) == 3
    assert sum(1 for c in k["cases"] if c.fallback) >= 10


def test_every_method_has_an_example_measured_on_the_h200() -> None:
    for m in kb()["methods"]:
        assert m.example is not None, m.id
        measured = [e for e in m.evidence if e.kind == "measured"]
        assert measured, f"{m.id}: no measured evidence"
        for e in measured:
            assert e.hardware == "NVIDIA H200" and e.task == m.example.task, m.id
            assert e.before_ms and e.after_ms and e.speedup == pytest.approx(e.before_ms / e.after_ms, rel=1e-3)
            assert (e.verdict == "slower") == (e.speedup < 1.0), m.id
            assert (e.verdict == "no_gain") == ("no measurable gain" in e.notes), m.id


def test_ids_are_unique() -> None:
    ids = [o.id for items in kb().values() for o in items]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes


def test_method_ids_come_from_the_contract() -> None:
    allowed = contract_method_ids()
    assert len(allowed) == 54
    k = kb()
    used = {m for c in k["cases"] for m in c.methods} | {m for v in k["vetoes"] for m in v.methods}
    assert used <= allowed, sorted(used - allowed)
    # every curated method is permitted by at least one case
    assert allowed <= {m for c in k["cases"] for m in c.methods}, sorted(allowed - used)
    assert {t for v in k["vetoes"] for t in v.tags} <= VETO_TAGS


def test_every_predicate_is_defined_and_used() -> None:
    k = kb()
    defined = {p.id for p in k["predicates"]}
    used: set[str] = set()
    for c in k["cases"]:
        used |= set(c.when) | set(c.unless)
    for b in k["bottlenecks"]:
        used |= set(b.signature) | set(b.forced_by)
    for v in k["vetoes"]:
        used |= set(v.when)
    assert used <= defined, sorted(used - defined)
    assert defined <= used, sorted(defined - used)


def test_references_resolve() -> None:
    k = kb()
    bottlenecks = {b.id for b in k["bottlenecks"]}
    tiers = {t.id for t in k["tiers"]}
    fields = {f.id for f in k["fields"]}
    for c in k["cases"]:
        assert c.fallback == (c.bottleneck is None), c.id
        assert c.bottleneck is None or c.bottleneck in bottlenecks, c.id
        assert set(c.tiers) <= tiers, c.id
        assert set(c.structures) <= {0, 1, 2, 3, 4}, c.id
        assert c.rationale.strip() and len(c.rationale) > 40, c.id
        assert not set(c.when) & set(c.unless), c.id
    for b in k["bottlenecks"]:
        assert set(b.metrics) <= fields, b.id
        assert any(c.bottleneck == b.id for c in k["cases"]), f"bottleneck {b.id} has no case"


# ------------------------------------------------------------------------------------------ fields, exprs


def test_fields_cover_the_contract() -> None:
    by_id = {f.id: f for f in kb()["fields"]}
    for name in FEATURE_NAMES:
        assert by_id[name].kind == FieldKind.feature
        assert by_id[name].type == ("int" if name == "kernel_structure_id" else "bool")
    assert by_id["kernel_structure_id"].domain == [0, 1, 2, 3, 4]
    for name in REFERENCE_PROFILE_FIELDS:
        assert by_id[name].kind == FieldKind.profile and by_id[name].unit, name
    for name in CONTEXT_FIELDS:
        assert by_id[name].kind == FieldKind.context, name
    for name in ("branch_divergence_pct", "memory_dependency_stall_ratio", "primary_limiter_util_pct",
                 "registers_limit_occupancy", "memory_compute_balance_pct", "launch_gap_ratio"):
        assert by_id[name].kind == FieldKind.derived, name
    assert set(by_id["task_dtype"].domain or []) == {"fp32", "fp16", "bf16", "mixed"}


def _names(expr: str) -> set[str]:
    """A tiny independent walk: every Name in the expression that is not a function being called."""
    tree = ast.parse(expr, mode="eval")
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def test_expressions_name_only_defined_fields() -> None:
    k = kb()
    fields = {f.id: f for f in k["fields"]}
    exprs = [(p.id, p.expr) for p in k["predicates"]] + [(f.id, f.expr) for f in k["fields"] if f.expr]
    for obj_id, expr in exprs:
        compile_expr(expr)  # the real whitelist accepts it
        unknown = _names(expr) - set(fields)
        assert not unknown, f"{obj_id}: {sorted(unknown)}"
    for f in k["fields"]:
        if f.expr:  # derived fields are computed from raw fields only (no order dependence)
            assert all(fields[n].kind != FieldKind.derived for n in _names(f.expr)), f.id


def test_profile_thresholds_use_base_units() -> None:
    """Duration thresholds are in ns (docs/profiling.md: us/ms must never meet rules in ns)."""
    for p in kb()["predicates"]:
        for m in re.finditer(r"kernel_duration_ns\s*[<>]=?\s*([0-9.e+]+)", p.expr):
            assert float(m.group(1)) >= 1000, p.id


# ------------------------------------------------------------------------------------------ tiers


def test_tiers_partition_the_line() -> None:
    tiers = sorted(kb()["tiers"], key=lambda t: t.lower if t.lower is not None else -math.inf)
    assert {t.field for t in tiers} == {"primary_limiter_util_pct"}
    assert [t.name for t in tiers] == ["H", "M", "L"]
    assert tiers[0].lower == 0 and tiers[-1].upper is None
    for a, b in zip(tiers, tiers[1:], strict=False):
        assert a.upper == b.lower
    for value in [0, 0.5, 59.999, 60, 60.01, 79.99, 80, 80.01, 100, 250]:
        hits = [t.name for t in tiers if t.lower <= value and (t.upper is None or value < t.upper)]
        assert len(hits) == 1, (value, hits)
    assert tier_of({"primary_limiter_util_pct": 60}) == "tier_m"
    assert tier_of({"primary_limiter_util_pct": 80}) == "tier_l"
    assert tier_of({}) is None


# ------------------------------------------------------------------------------------------ the workflow


@cache
def compiled(expr: str):
    return compile_expr(expr)


def derive(env: dict[str, Any]) -> dict[str, Any]:
    out = dict(env)
    for f in kb()["fields"]:
        if f.expr:
            value = compiled(f.expr).evaluate(env)
            if value is not None:
                out[f.id] = value
    return out


def tier_of(env: dict[str, Any]) -> str | None:
    for t in kb()["tiers"]:
        v = env.get(t.field)
        if v is None:
            return None
        if (t.lower is None or v >= t.lower) and (t.upper is None or v < t.upper):
            return t.id
    return None


def predicate_values(env: dict[str, Any]) -> dict[str, bool | None]:
    return {p.id: compiled(p.expr).evaluate(env) for p in kb()["predicates"]}


def _case_matches(c, pv, tier, structure) -> bool:
    return ((not c.tiers or tier in c.tiers) and (not c.structures or structure in c.structures)
            and all(pv[w] is True for w in c.when) and not any(pv[u] is True for u in c.unless))


def candidates(pv) -> list:
    out = []
    for b in kb()["bottlenecks"]:
        forced = any(pv[p] is True for p in b.forced_by)
        if forced or all(pv[p] is True for p in b.signature):
            out.append(((0 if forced else 1, b.priority, b.id), b))
    return [b for _, b in sorted(out, key=lambda x: x[0])]


def decide(env: dict[str, Any]) -> tuple[str | None, str]:
    """(bottleneck, case id) chosen by the documented workflow for a raw environment."""
    full = derive(env)
    pv = predicate_values(full)
    tier, structure = tier_of(full), full.get("kernel_structure_id")
    cases = sorted_cases()
    for b in candidates(pv):
        for c in cases:
            if c.bottleneck == b.id and _case_matches(c, pv, tier, structure):
                return b.id, c.id
    for c in cases:
        if c.fallback and _case_matches(c, pv, tier, structure):
            return None, c.id
    raise AssertionError("no case matched: the catch-all fallback is missing")


# ------------------------------------------------------------------------------------------ reachability

PCT = [5, 30, 50, 58, 62, 70, 78, 82, 90, 97]
DOMAINS: dict[str, list[Any]] = {
    "dram_throughput_pct": PCT, "l2_throughput_pct": PCT, "l1_throughput_pct": PCT, "sm_throughput_pct": PCT,
    "achieved_occupancy_pct": [10, 25, 35, 60, 90],
    "registers_per_thread": [32, 64, 96, 128, 168, 255],
    "occ_limit_registers_blocks": [1, 2, 4, 8, 16, 32],
    "occ_limit_sharedmem_blocks": [1, 2, 4, 8, 16, 32],
    "occ_limit_warps_blocks": [1, 2, 4, 8, 16, 32],
    "kernel_duration_ns": [2000, 3500, 6000, 9000, 15000, 50000, 300000, 3000000],
    "stall_long_scoreboard_ratio": [0.02, 0.1, 0.2, 0.35, 0.6, 1.0, 2.0],
    "stall_short_scoreboard_ratio": [0.02, 0.1, 0.2, 0.35, 0.6, 1.0, 2.0],
    "stall_no_instruction_ratio": [0.02, 0.1, 0.2, 0.35, 0.6, 1.0, 2.0],
    "stall_not_selected_ratio": [0.02, 0.1, 0.2, 0.35, 0.6, 1.0, 2.0],
    "branch_divergent_cnt": [0, 2, 10, 50, 500],
    "branch_uniform_cnt": [10, 100, 1000, 10000],
    "pred_on_threads_per_inst": [12, 20, 26, 31, 32],
    "warps_eligible_cnt": [0.3, 0.8, 1.5, 3.0],
    "launches_per_forward": [1, 2, 3, 5, 12],
    "task_dtype": ["fp32", "fp16", "bf16", "mixed", None],
    "tolerance_atol": [1e-5, 1e-4, 1e-3, 1e-2, 5e-2, None],
    "tolerance_rtol": [1e-5, 1e-4, 1e-3, 1e-2, None],
    "vendor_kernel_dominant": [True, False],
    "has_profile": [True, False],
    "arch_sm": [80, 86, 90, None],
    "library_calls_allowed": [True, False, None],
    "kernel_structure_id": [0, 1, 2, 3, 4],
    "op_family": [*OP_FAMILIES, None],  # None: no hint (no task, no source rule matched)
    "op_softmax_online": [True, False, None],
    "op_row_in_registers": [True, False, None],
    "op_is_serial_scan": [True, False, None],
    "uses_global_atomics": [True, False, None],
    "dominant_kernel_share_pct": [40, 75, 95, None],
    "single_custom_launch": [True, False, None],
    "op_gathers_rows": [True, False, None],
    "op_branch_chain": [True, False, None],
    "access_unit_stride": [True, False, None],
    "op_norm_foldable": [True, False, None],
    "launch_grid_blocks": [8, 64, 200, 5000, None],
    "device_sm_count": [132, 108],
    "op_has_softmax": [True, False],
    "op_has_norm": [True, False],
    "dominant_op": ["gemm", "conv", "attention", "softmax", "normalization", "reduction", "elementwise", "copy",
                    None],
    "tf32_allowed": [True, False, None],
    # the source counters of coalescing (excess 1.0, 1.2, 2.5 and 5 against an ideal of 1e6 sectors)
    "global_sectors": [1.0e6, 1.2e6, 2.5e6, 5.0e6, None],
    "global_sectors_ideal": [1.0e6],
    "has_kernel": [False, None],  # False: a task file with no kernel (no profile, no code features)
    "task_family": ["gemm", "conv", "attention", "softmax", "normalization", "reduction", "scan", "pooling",
                    "elementwise", None],
    **{name: [True, False] for name in FEATURE_NAMES if name != "kernel_structure_id"},
}
PROFILE_KEYS = REFERENCE_PROFILE_FIELDS | {"vendor_kernel_dominant", "global_sectors", "global_sectors_ideal"}


def realistic(raw: dict[str, Any]) -> dict[str, Any]:
    """Apply the labelling convention (docs/features.md) so that impossible code is never searched."""
    e = dict(raw)
    structure = e["kernel_structure_id"]
    if structure in (0, 2, 3):
        e["is_gemm_kloop"] = e["is_naive_gemm"] = False
    if structure in (0, 3):
        e.update(tc_eligible=False, is_stencil_conv=False, has_k_loop=False)
    dominant = e.get("dominant_op")  # the work features are the dominant kernel's (retrieval/kernels.py)
    if dominant in ("gemm", "conv", "attention"):
        if structure in (0, 2, 3):
            e["dominant_op"] = None
        elif dominant == "conv":
            e.update(tc_eligible=True, has_k_loop=True, is_stencil_conv=True, is_gemm_kloop=False, is_naive_gemm=False)
        else:
            e.update(tc_eligible=True, has_k_loop=True, is_stencil_conv=False)
    elif dominant not in (None, "other") and e["tc_eligible"]:
        e["dominant_op"] = None  # matmul work in the features: the dominant kernel is not an epilogue kernel
    if e["is_naive_gemm"]:
        e.update(is_gemm_kloop=True, has_reuse=False)
    if e["is_gemm_kloop"]:
        e.update(has_k_loop=True, tc_eligible=True, is_stencil_conv=False)
    if e["is_stencil_conv"]:
        e["has_k_loop"] = True
    if structure == 1 or e["has_reuse"] or e["tc_eligible"] or e["has_k_loop"] or e["is_stencil_conv"]:
        e.update(is_pointwise=False, streaming_no_reuse=False)
    if e["is_pointwise"]:
        e["streaming_no_reuse"] = True
    if e["has_vector_load_store"]:
        e["uses_vector_types"] = True
    if not (e["has_vector_load_store"] or e["uses_vector_types"]):
        e["is_aligned_vector_access"] = True
    multi = structure == 4
    e["has_multiple_kernels_in_forward"] = multi
    if not multi:
        e["cudagraph_eligible"] = False
        e["launches_per_forward"] = 1
    elif e["launches_per_forward"] < 2:
        e["launches_per_forward"] = 2
    family = e.get("op_family")  # the op hints are derived from the family (retrieval/op_hints.py)
    e["op_is_gemv"] = None if family is None else family == "gemv"
    e["op_is_pool_nonoverlap"] = None if family is None else family == "pool"
    for stage, families in (("op_has_softmax", ("softmax", "attention")), ("op_has_norm", ("norm",))):
        if family is None:
            e[stage] = None
        elif family in families:
            e[stage] = True
    if family != "softmax" and e.get("op_softmax_online") is not None:
        e["op_softmax_online"] = False
    if e.get("has_kernel") is False:  # a task with no kernel: advised per family, never profiled
        e["has_profile"] = False
    else:
        e["task_family"] = None
    if not e["has_profile"]:
        for key in PROFILE_KEYS:
            e.pop(key, None)
        e.pop("dominant_kernel_share_pct", None)
    elif not multi and e.get("dominant_kernel_share_pct") is not None:
        e["dominant_kernel_share_pct"] = 100
    return {k: v for k, v in e.items() if v is not None}


def _rank(c) -> tuple:
    """Among matching cases: lowest priority, then the most specific, then the id (as the engine does)."""
    return c.priority, -(len(c.when) + len(c.unless) + bool(c.tiers) + bool(c.structures)), c.id


@cache
def sorted_cases() -> tuple:
    return tuple(sorted(kb()["cases"], key=_rank))


@cache
def raw_inputs(pred_id: str) -> frozenset[str]:
    """The raw (non-derived) fields a predicate depends on, through derived fields."""
    fields = {f.id: f for f in kb()["fields"]}
    expr = next(p.expr for p in kb()["predicates"] if p.id == pred_id)
    out, stack = set(), list(_names(expr))
    while stack:
        name = stack.pop()
        f = fields[name]
        if f.expr:
            stack.extend(_names(f.expr))
        else:
            out.add(name)
    return frozenset(out & set(DOMAINS))


def _vars(pred_ids) -> set[str]:
    return set().union(*(raw_inputs(p) for p in pred_ids)) if pred_ids else set()


def distance(target, env: dict[str, Any]) -> tuple[int, list[set[str]]]:
    """How far ``env`` is from selecting ``target``, and which raw fields each remaining gap names."""
    full = derive(env)
    pv = predicate_values(full)
    tier, structure = tier_of(full), full.get("kernel_structure_id")
    gaps: list[set[str]] = []
    if target.tiers and tier not in target.tiers:
        gaps += [{"dram_throughput_pct", "l2_throughput_pct", "sm_throughput_pct", "has_profile"}] * 2
    if target.structures and structure not in target.structures:
        gaps += [{"kernel_structure_id"}] * 2
    gaps += [set(raw_inputs(w)) for w in target.when if pv[w] is not True]
    gaps += [set(raw_inputs(u)) for u in target.unless if pv[u] is True]
    cands = candidates(pv)
    if target.fallback:
        gaps += [_vars([*b.signature, *b.forced_by]) for b in cands]
        before = [c for c in sorted_cases() if c.fallback and _rank(c) < _rank(target)]
    else:
        mine = next(b for b in kb()["bottlenecks"] if b.id == target.bottleneck)
        if mine not in cands:
            gaps += [set(raw_inputs(p)) for p in mine.signature if pv[p] is not True] or [{"has_profile"}]
            ahead = cands
        else:
            ahead = cands[:cands.index(mine)]
        gaps += [_vars([*b.signature, *b.forced_by]) for b in ahead]
        before = [c for c in sorted_cases() if c.bottleneck == target.bottleneck and _rank(c) < _rank(target)]
    gaps += [_vars([*c.when, *c.unless]) | {"kernel_structure_id"} for c in before
             if _case_matches(c, pv, tier, structure)]
    return len(gaps), gaps


CALM_PROFILE = dict(dram_throughput_pct=30, l2_throughput_pct=30, l1_throughput_pct=30, sm_throughput_pct=30,
                    achieved_occupancy_pct=60, registers_per_thread=32, occ_limit_registers_blocks=8,
                    occ_limit_sharedmem_blocks=8, occ_limit_warps_blocks=8, kernel_duration_ns=300000,
                    stall_long_scoreboard_ratio=0.1, stall_short_scoreboard_ratio=0.1,
                    stall_no_instruction_ratio=0.02, stall_not_selected_ratio=0.02, branch_divergent_cnt=0,
                    branch_uniform_cnt=1000, pred_on_threads_per_inst=32, warps_eligible_cnt=1.5,
                    vendor_kernel_dominant=False)


def search(target, rng: random.Random, restarts: int = 40, steps: int = 80) -> dict[str, Any] | None:
    """WalkSAT-style local search: pick a remaining gap, re-choose one field it names, keep the best."""
    for attempt in range(restarts):
        raw = {k: rng.choice(v) for k, v in DOMAINS.items()}
        if attempt % 2 == 0:  # every other restart starts from a calm profile (no unit or stall stands out)
            raw.update(CALM_PROFILE)
        if target.structures:
            raw["kernel_structure_id"] = rng.choice(target.structures)
        env = realistic(raw)
        best, gaps = distance(target, env)
        for _ in range(steps):
            if best == 0:
                return env
            names = sorted(rng.choice(gaps) or DOMAINS)
            key = rng.choice(names)
            options = []
            for value in DOMAINS[key]:
                trial_raw = {**raw, key: value}
                trial = realistic(trial_raw)
                score, trial_gaps = distance(target, trial)
                options.append((score, rng.random(), trial_raw, trial, trial_gaps))
            score, _, trial_raw, trial, trial_gaps = min(options, key=lambda o: (o[0], o[1]))
            if score <= best or rng.random() < 0.1:
                raw, env, best, gaps = trial_raw, trial, score, trial_gaps
        if best == 0:
            return env
    return None


SAFETY_NET = "fb_catch_all"  # only for inputs without a structure or has_profile (never built by retrieval)


def test_the_safety_net_catches_an_empty_input() -> None:
    assert decide({}) == (None, SAFETY_NET)


@cache
def witnesses() -> dict[str, dict[str, Any]]:
    """For each case, one realistic input under which the workflow selects it. The search is seeded per case,
    so a case added or removed leaves every other case's search as it was."""
    found: dict[str, dict[str, Any]] = {}
    for case in sorted(kb()["cases"], key=lambda c: c.id):
        if case.id != SAFETY_NET:
            env = search(case, random.Random(f"20261202/{case.id}"), restarts=120)  # a rare case needs more
            if env is not None:
                found[case.id] = env
    return found


def test_every_case_is_reachable() -> None:
    found = witnesses()
    unreachable = sorted(c.id for c in kb()["cases"] if c.id not in found and c.id != SAFETY_NET)
    assert not unreachable, f"no realistic input selects: {unreachable}"
    for case_id, env in found.items():
        assert decide(env)[1] == case_id, (case_id, env)


def test_the_real_engine_selects_the_same_cases() -> None:
    """The rule engine of retrieval/ picks, for each witness input, the case this file's model picks."""
    engine = pytest.importorskip("kernelskill.retrieval.engine")
    memory_kb = pytest.importorskip("kernelskill.retrieval.memory_kb")
    k = kb()
    store = memory_kb.MemoryKB(fields=k["fields"], predicates=k["predicates"], tiers=k["tiers"],
                               bottlenecks=k["bottlenecks"], cases=k["cases"], vetoes=k["vetoes"])
    disagree = []
    for case_id, env in witnesses().items():
        decision = engine.decide(store, dict(env), structure=env.get("kernel_structure_id"))
        if decision.case.id != case_id:
            disagree.append((case_id, decision.case.id))
    assert not disagree


def test_static_only_queries_get_structure_fallbacks() -> None:
    """No profile: never a bottleneck, and every structure has its own static fallback."""
    base = {name: False for name in FEATURE_NAMES}
    for structure in range(5):
        env = realistic({**base, "kernel_structure_id": structure, "has_profile": False,
                         "is_aligned_vector_access": True, "launches_per_forward": 2})
        bottleneck, case_id = decide(env)
        assert bottleneck is None
        case = next(c for c in kb()["cases"] if c.id == case_id)
        assert case.fallback and "static_only" in case.when and structure in case.structures, case_id


# ------------------------------------------------------------------------------------------ expert spot checks

FEATURES_OFF = {name: False for name in FEATURE_NAMES} | {"is_aligned_vector_access": True}


def _env(features: dict[str, Any], **rest: Any) -> dict[str, Any]:
    raw = {**FEATURES_OFF, **features, **rest}
    raw.setdefault("launches_per_forward", 1)
    return realistic(raw)


def _methods(case_id: str) -> list[str]:
    return next(c for c in kb()["cases"] if c.id == case_id).methods


PROFILE_IDLE = dict(dram_throughput_pct=20, l2_throughput_pct=25, l1_throughput_pct=30, sm_throughput_pct=25,
                    achieved_occupancy_pct=80, registers_per_thread=32, occ_limit_registers_blocks=8,
                    occ_limit_sharedmem_blocks=32, occ_limit_warps_blocks=8, kernel_duration_ns=2_000_000,
                    stall_long_scoreboard_ratio=0.6, stall_short_scoreboard_ratio=0.05,
                    stall_no_instruction_ratio=0.02, stall_not_selected_ratio=0.05, branch_divergent_cnt=0,
                    branch_uniform_cnt=1000, pred_on_threads_per_inst=31.5, warps_eligible_cnt=1.2,
                    vendor_kernel_dominant=False, has_profile=True)
NAIVE_GEMM = dict(is_naive_gemm=True, is_gemm_kloop=True, has_k_loop=True, tc_eligible=True,
                  kernel_structure_id=1, has_bounds_check=True)
RELU = dict(is_pointwise=True, streaming_no_reuse=True, kernel_structure_id=0)


def test_naive_gemm_gets_tiling_first_with_or_without_profile() -> None:
    static = decide(_env(NAIVE_GEMM, has_profile=False))
    l1_bound = decide(_env(NAIVE_GEMM, **{**PROFILE_IDLE, "l1_throughput_pct": 95, "sm_throughput_pct": 70}))
    latency = decide(_env(NAIVE_GEMM, **PROFILE_IDLE))
    for _, case_id in (static, l1_bound, latency):
        assert _methods(case_id)[:2] == ["shared_memory_tiling", "register_blocking"], case_id
    assert l1_bound[0] == "uncoalesced_access" and latency[0] == "memory_latency"


def test_elementwise_at_90_pct_dram_is_tier_l_cut_bytes() -> None:
    env = _env(RELU, has_vector_load_store=True, uses_vector_types=True,
               **{**PROFILE_IDLE, "dram_throughput_pct": 91, "l2_throughput_pct": 60})
    assert tier_of(derive(env)) == "tier_l"
    bottleneck, case_id = decide(env)
    assert (bottleneck, case_id) == ("memory_bandwidth", "mb_l_single_stream")
    assert "vectorized_access_16b" not in _methods(case_id)[:1]


def test_scalar_elementwise_at_70_pct_dram_widens_accesses() -> None:
    env = _env(RELU, **{**PROFILE_IDLE, "dram_throughput_pct": 70})
    assert decide(env) == ("memory_bandwidth", "mb_m_stream_scalar")
    assert _methods("mb_m_stream_scalar")[0] == "vectorized_access_16b"


def test_priority_rule_dram_80_forces_memory_bandwidth() -> None:
    # the SM is busier, but DRAM >= 80 forces memory bandwidth first (priority rule of docs/profiling.md)
    env = _env(RELU, **{**PROFILE_IDLE, "dram_throughput_pct": 82, "sm_throughput_pct": 90})
    assert decide(env)[0] == "memory_bandwidth"


def test_softmax_and_norm_static_advice() -> None:
    env = _env(dict(kernel_structure_id=3, uses_transcendentals=True, has_shared_memory_tile=True),
               has_profile=False)
    methods = _methods(decide(env)[1])
    assert methods[0] == "warp_shuffle_reduction"
    assert {"online_softmax", "welford_one_pass_norm"} <= set(methods[:3])


def test_histogram_by_global_atomics_privatizes() -> None:
    env = _env(dict(kernel_structure_id=3), **{**PROFILE_IDLE, "stall_long_scoreboard_ratio": 0.1})
    bottleneck, case_id = decide(env)
    assert bottleneck == "atomic_contention" and _methods(case_id)[0] == "atomic_privatization"


def test_register_only_reduction_with_a_starved_grid_is_underfilled_not_contended() -> None:
    """One thread per row of a short batch (16 blocks, 12 % occupancy, no shared stage) looks like a
    global-atomics reduction in its features; the occupancy says the grid is starved (held-out set)."""
    starved = {**PROFILE_IDLE, "achieved_occupancy_pct": 12, "stall_long_scoreboard_ratio": 0.9,
               "dram_throughput_pct": 2, "l2_throughput_pct": 4, "l1_throughput_pct": 55, "sm_throughput_pct": 2}
    bottleneck, case_id = decide(_env(dict(kernel_structure_id=3, streaming_no_reuse=True), **starved))
    assert bottleneck == "underfilled_grid" and _methods(case_id)[0] == "block_reduction"
    # without a profile the first move must suit both readings (atomics or a serial per-thread walk)
    static = decide(_env(dict(kernel_structure_id=3, streaming_no_reuse=True), has_profile=False))[1]
    assert _methods(static)[0] == "warp_shuffle_reduction"


def test_mio_bound_tiled_gemm_blocks_registers_before_padding() -> None:
    tiled = dict(is_gemm_kloop=True, has_k_loop=True, tc_eligible=True, has_reuse=True,
                 has_shared_memory_tile=True, kernel_structure_id=1)
    mio = {**PROFILE_IDLE, "l1_throughput_pct": 91, "sm_throughput_pct": 78, "l2_throughput_pct": 23,
           "dram_throughput_pct": 4, "stall_short_scoreboard_ratio": 0.36, "stall_long_scoreboard_ratio": 0.07}
    assert decide(_env(tiled, **mio)) == ("smem_bank_conflicts", "sb_contraction")
    assert _methods("sb_contraction")[0] == "register_blocking"


def test_l1_bound_attention_goes_flash_style() -> None:
    attention = dict(is_gemm_kloop=True, has_k_loop=True, tc_eligible=True, uses_transcendentals=True,
                     has_shared_memory_tile=True, kernel_structure_id=1)
    l1 = {**PROFILE_IDLE, "l1_throughput_pct": 94, "l2_throughput_pct": 30, "sm_throughput_pct": 45}
    assert decide(_env(attention, **l1)) == ("uncoalesced_access", "ua_attention")
    assert _methods("ua_attention")[0] == "flash_attention_tiling"


def test_scalar_stream_at_tier_l_widens_before_cutting_bytes() -> None:
    env = _env(RELU, **{**PROFILE_IDLE, "dram_throughput_pct": 84, "l2_throughput_pct": 80})
    assert decide(env) == ("memory_bandwidth", "mb_l_stream_scalar")
    assert _methods("mb_l_stream_scalar")[0] == "vectorized_access_16b"


def test_multi_kernel_gemm_forward_fuses_the_epilogue() -> None:
    env = _env(dict(kernel_structure_id=4, tc_eligible=True, has_k_loop=True, is_gemm_kloop=True,
                    cudagraph_eligible=True), launches_per_forward=3, has_profile=False)
    assert _methods(decide(env)[1])[0] == "epilogue_fusion"


def test_many_tiny_launches_are_launch_overhead() -> None:
    env = _env(dict(kernel_structure_id=4, is_pointwise=True, cudagraph_eligible=True),
               launches_per_forward=6, **{**PROFILE_IDLE, "kernel_duration_ns": 4000})
    bottleneck, case_id = decide(env)
    assert bottleneck == "launch_overhead" and case_id == "lv_graphable_chain"


def test_hopper_gemm_with_budget_goes_to_wgmma() -> None:
    tiled = dict(is_gemm_kloop=True, has_k_loop=True, tc_eligible=True, has_reuse=True,
                 has_shared_memory_tile=True, kernel_structure_id=1)
    busy = {**PROFILE_IDLE, "sm_throughput_pct": 75, "l1_throughput_pct": 60, "stall_long_scoreboard_ratio": 0.1,
            "stall_not_selected_ratio": 0.3}
    hopper = decide(_env(tiled, task_dtype="bf16", arch_sm=90, library_calls_allowed=False, **busy))
    ampere = decide(_env(tiled, task_dtype="bf16", arch_sm=80, library_calls_allowed=False, **busy))
    strict = decide(_env(tiled, task_dtype="fp32", tolerance_atol=1e-4, arch_sm=90, library_calls_allowed=False,
                         **busy))
    assert hopper == ("compute_bound_fp32", "cf_gemm_hopper_tc")
    assert ampere == ("compute_bound_fp32", "cf_gemm_tc")
    assert strict == ("compute_bound_fp32", "cf_m_gemm_strict")


# ------------------------------------------------------------------------------------------ vetoes


def _veto(veto_id: str):
    return next(v for v in kb()["vetoes"] if v.id == veto_id)


def _fires(veto_id: str, env: dict[str, Any]) -> bool:
    pv = predicate_values(derive(env))
    return all(pv[w] is True for w in _veto(veto_id).when)


def test_query_vetoes_fire_where_they_should() -> None:
    relu = _env(RELU, has_profile=False)
    assert _fires("no_caching_without_reuse", relu)
    assert not _fires("no_caching_without_reuse", _env(NAIVE_GEMM, has_profile=False))
    float3 = _env(dict(RELU, uses_vector_types=True, is_aligned_vector_access=False), has_profile=False)
    assert _fires("no_fake_vectorization", float3) and not _fires("no_fake_vectorization", relu)
    strict = dict(task_dtype="fp32", tolerance_atol=1e-4)
    assert _fires("no_precision_downcast_fp32", _env(RELU, has_profile=False, **strict))
    assert _fires("no_precision_downcast_fp32", _env(RELU, has_profile=False))  # unknown = strict
    assert not _fires("no_precision_downcast_fp32", _env(RELU, has_profile=False, task_dtype="bf16"))
    assert not _fires("no_precision_downcast_fp32",
                      _env(RELU, has_profile=False, task_dtype="fp32", tolerance_atol=1e-2))
    assert _fires("hopper_only_needs_sm90", _env(RELU, has_profile=False, arch_sm=80))
    assert not _fires("hopper_only_needs_sm90", _env(RELU, has_profile=False, arch_sm=90))
    assert _fires("no_library_when_forbidden", _env(RELU, has_profile=False, library_calls_allowed=False))
    assert not _fires("no_library_when_forbidden", _env(RELU, has_profile=False, library_calls_allowed=True))
    assert set(_veto("no_precision_downcast_fp32").tags) == {"precision"}
    assert set(_veto("hopper_only_needs_sm90").tags) == {"hopper_only"}
    assert set(_veto("no_library_when_forbidden").tags) == {"library"}


CHEATS = {
    "no_side_streams": "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    y = self.k(x)",
    "no_timer_tricks": "torch.cuda.Event = FakeEvent",
    "no_reference_op_for_main_computation": "def forward(self, a, b):\n    return torch.matmul(a, b)",
    "no_threads": "import threading\nthreading.Thread(target=work).start()",
    "no_output_caching": "if x.data_ptr() in self._memo:\n    return self._memo[x.data_ptr()]",
    "no_lazy_tensor_tricks": "class Lazy(torch.Tensor):\n    def __torch_dispatch__(cls, func, types, args):",
}
HONEST = """
import torch
from torch.utils.cpp_extension import load_inline
cuda_src = r'''
__global__ void relu_kernel(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) { float4 v = x[i]; v.x = fmaxf(v.x, 0.f); y[i] = v; }
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const float* p = x.data_ptr<float>();
    auto stream = at::cuda::getCurrentCUDAStream();
    relu_kernel<<<(x.numel() / 4 + 255) / 256, 256, 0, stream>>>(
        reinterpret_cast<const float4*>(p), reinterpret_cast<float4*>(y.data_ptr<float>()), x.numel() / 4);
    return y;
}
'''
class ModelNew(torch.nn.Module):
    def forward(self, x):  # half of the work is the launch
        return self.ext.relu(x.contiguous())
"""


def test_candidate_patterns_catch_cheats_and_spare_honest_code() -> None:
    vetoes = {v.id: v for v in kb()["vetoes"]}
    for veto_id, code in CHEATS.items():
        assert "candidate" in vetoes[veto_id].scope
        assert any(re.search(p, code) for p in vetoes[veto_id].patterns), veto_id
    for v in vetoes.values():
        for pattern in v.patterns:
            assert not re.search(pattern, HONEST), (v.id, pattern)


# ------------------------------------------------------------------------------------------ real lint


@pytest.mark.parametrize("section_file", [p.name for p in MY_FILES[:5]] + ["cases"])
def test_real_lint_reports_no_error_in_the_decision_logic(section_file: str) -> None:
    from kernelskill.kb.lint import lint
    from kernelskill.kb.loader import load_report

    skills, issues = load_report([[SKILLS]])
    report = lint(skills, issues)
    mine = [f for f in report.errors if f.code != "undefined_method"
            and (Path(f.file).name == section_file or f"/{section_file}/" in f.file)]
    assert not mine, [str(f) for f in mine]
    # method ids are checked against the contract list above; once every curated method is written,
    # none may be missing from the KB either
    if contract_method_ids() <= {m.id for m in skills.methods}:
        missing = [f for f in report.errors if f.code == "undefined_method"
                   and (Path(f.file).name == section_file or f"/{section_file}/" in f.file)]
        assert not missing, [str(f) for f in missing]
