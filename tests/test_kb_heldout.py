"""Held-out agreement (the KB's quality bar): 25 kernels that are not examples of the
KB (tests/data/heldout/kernels, KernelBench-style ModelNew files with load_inline CUDA), each with a
synthetic H200 ncu CSV and an expert label written before any query ran (labels.yaml). Every kernel is
queried through the real API (feature extraction, CSV ingestion, the rule engine, vetoes) over an
in-memory KB of kb/skills, static-only and with its profile, with the op-family hints of its source and
the profile's dominant-kernel share as context (retrieval/context.py ``query_context``), and the answer
is compared with the label.

Run as a script to print the agreement table that docs/kb.md quotes:

    /work/venv/bin/python tests/test_kb_heldout.py                    # in-memory KB of kb/skills
    /work/venv/bin/python tests/test_kb_heldout.py --skills DIR       # another skills folder (a git archive)
    /work/venv/bin/python tests/test_kb_heldout.py --home H           # the real store of `kb init --home H`

The in-memory KB has no vector index, so its permitted lists are in the case's order; the real store
also ranks static-only answers by similarity (reciprocal-rank fusion with the case order).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "tests" / "data" / "heldout"
SKILLS = ROOT / "kb" / "skills"
#: what the script measures against (the tests always use the in-memory KB of kb/skills)
SOURCE: dict[str, Any] = {"skills": SKILLS, "home": None}
#: the query's default context (docs/kb.md): H200, libraries forbidden; no task, so dtype and tolerance
#: are unknown and treated as strict fp32
CONTEXT = {"arch_sm": 90, "library_calls_allowed": False}

#: agreement this KB reaches on the held-out set (docs/kb.md has the table); a change to kb/skills
#: that lowers one of them needs a reason, a change that raises one should raise the floor
FLOORS = {
    # bottleneck 0.92: naive_gemm_rect and bmm_naive read as onchip_operand_traffic since the static unit-stride
    # fact (their code is coalesced; the class came after their labels, which say uncoalesced_access and are
    # kept as written); their first methods still agree
    "profiled": {"bottleneck": 0.92, "first": 1.0, "top3": 1.0, "no_must_not": 1.0},
    "static": {"first": 1.0, "top3": 1.0, "no_must_not": 1.0},
}
#: must-not methods that are still permitted, and why the decision data cannot tell (strict xfails: a fix
#: must remove the entry). The five of the first measurement (GEMV tiled like a GEMM, softmax and norms
#: sharing one case, a serial cumsum offered atomic privatisation) are fixed by the op-family hints of
#: retrieval/op_hints.py; none is left.
KNOWN_MUST_NOT: dict[str, str] = {}


@cache
def labels() -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((HELDOUT / "labels.yaml").read_text())
    return {k["id"]: k for k in data["kernels"]}


@cache
def store() -> Any:
    from kernelskill.kb.loader import load_report
    from kernelskill.retrieval.memory_kb import MemoryKB

    skills, issues = load_report([[Path(SOURCE["skills"])]])
    assert not issues, [str(i) for i in issues[:5]]
    return MemoryKB.from_skillset(skills)


@dataclass
class Outcome:
    kernel: str
    mode: str  # "static" or "profiled"
    tier: str | None
    bottleneck: str | None
    case: str | None
    permitted: list[str]
    bottleneck_ok: bool | None  # None: static-only (no diagnosis to check)
    first_ok: bool
    top3_ok: bool
    top3_overlap: float
    must_not_hit: list[str]


def query_context_of(kernel: str, profile: Path | None) -> dict[str, Any]:
    """The query's context: the defaults above plus the op-family hints of the kernel's source and the
    profile's dominant-kernel share (retrieval/context.py ``query_context``; no task file here)."""
    from kernelskill.retrieval.context import query_context
    from kernelskill.retrieval.profile import load_profile

    source = (HELDOUT / "kernels" / f"{kernel}.py").read_text()
    hints = query_context(source, None, load_profile(profile) if profile is not None else None)
    return {**hints.fields, **CONTEXT}


@cache
def outcome(kernel: str, mode: str) -> Outcome:
    from kernelskill.retrieval.api import query

    lab = labels()[kernel]
    profile = HELDOUT / "profiles" / f"{kernel}.csv" if mode == "profiled" else None
    context = query_context_of(kernel, profile)
    if SOURCE["home"] is not None:
        from kernelskill.config import load_settings

        r = query(HELDOUT / "kernels" / f"{kernel}.py", profile=profile, settings=load_settings(home=SOURCE["home"]),
                  context=context)
    else:
        r = query(HELDOUT / "kernels" / f"{kernel}.py", profile=profile, store=store(), context=context)
    permitted = r.first_methods(99)
    acceptable = set(lab["first"] if mode == "profiled" else lab.get("static_first", lab["first"]))
    top3 = set(permitted[:3])
    return Outcome(
        kernel=kernel, mode=mode, tier=r.tier.name, bottleneck=r.bottleneck.id, case=r.case.id,
        permitted=permitted,
        bottleneck_ok=(r.bottleneck.id in lab["bottleneck"]) if mode == "profiled" else None,
        first_ok=bool(permitted) and permitted[0] in acceptable,
        top3_ok=bool(top3 & acceptable),
        top3_overlap=len(top3 & acceptable) / min(3, len(acceptable)),
        must_not_hit=[m for m in permitted if m in set(lab["must_not"])])


def agreement(mode: str) -> dict[str, float]:
    outs = [outcome(k, mode) for k in labels()]
    n = len(outs)
    res = {"first": sum(o.first_ok for o in outs) / n, "top3": sum(o.top3_ok for o in outs) / n,
           "top3_overlap": sum(o.top3_overlap for o in outs) / n,
           "no_must_not": sum(not o.must_not_hit for o in outs) / n}
    if mode == "profiled":
        res["bottleneck"] = sum(bool(o.bottleneck_ok) for o in outs) / n
    return res


# ------------------------------------------------------------------------------------------ tests


def test_the_heldout_set_is_complete() -> None:
    """25 kernels, each with a kernel file, a synthetic profile that says so, and a full label."""
    lab = labels()
    assert len(lab) >= 25
    method_ids = {m.id for m in store().methods()}
    bottlenecks = {b.id for b in store().bottlenecks()}
    for kid, entry in lab.items():
        assert (HELDOUT / "kernels" / f"{kid}.py").is_file(), kid
        csv_text = (HELDOUT / "profiles" / f"{kid}.csv").read_text()
        assert csv_text.startswith("==SYNTHETIC=="), kid
        assert set(entry["bottleneck"]) <= bottlenecks, kid
        named = set(entry["first"]) | set(entry.get("static_first", [])) | set(entry["must_not"])
        assert named <= method_ids, (kid, sorted(named - method_ids))
        assert 1 <= len(entry["first"]) <= 3 and not set(entry["first"]) & set(entry["must_not"]), kid
        assert entry["why"].strip(), kid


@pytest.mark.parametrize("mode", ["profiled", "static"])
def test_agreement_with_the_expert_labels(mode: str) -> None:
    got = agreement(mode)
    low = {k: (round(got[k], 3), floor) for k, floor in FLOORS[mode].items() if got[k] + 1e-9 < floor}
    misses = [f"{o.kernel}: {o.bottleneck} / {o.case} -> {o.permitted[:3]}" for o in
              (outcome(k, mode) for k in labels()) if not o.first_ok or o.bottleneck_ok is False]
    assert not low, (low, misses)


@pytest.mark.parametrize("kernel", [
    pytest.param(k, marks=pytest.mark.xfail(reason=KNOWN_MUST_NOT[k], strict=True)) if k in KNOWN_MUST_NOT else k
    for k in sorted(labels())])
def test_no_forbidden_method_is_permitted(kernel: str) -> None:
    """A must-not method (wrong for the kernel, or excluded by the strict-fp32 / no-library context) is
    never in the permitted list, with or without the profile."""
    for mode in ("profiled", "static"):
        o = outcome(kernel, mode)
        assert not o.must_not_hit, (mode, o.case, o.must_not_hit)


def test_the_trace_shows_why_for_every_profiled_answer() -> None:
    """A reader can see why: the tier's input, the chosen bottleneck's predicates with their inputs, and
    the matched case's gates are all in the trace of each profiled held-out query."""
    from kernelskill.retrieval.api import query

    for kid in ("transpose_naive", "reduce_sum_atomic", "tiny_chain"):
        r = query(HELDOUT / "kernels" / f"{kid}.py", profile=HELDOUT / "profiles" / f"{kid}.csv",
                  store=store(), context=dict(CONTEXT))
        why = r.why()
        kinds = {s.kind for s in why}
        assert {"tier", "case"} <= kinds, (kid, kinds)
        assert any(s.kind == "predicate" and s.inputs for s in why), kid
        case_step = next(s for s in r.trace if s.kind == "case" and s.id == r.case.id)
        assert case_step.value is True


# ------------------------------------------------------------------------------------------ table


def table() -> str:
    rows = ["| kernel | tier | bottleneck (profile) | case (profile) | first 3 (profile) | case (static) | "
            "first 3 (static) |", "|---|---|---|---|---|---|---|"]

    def mark(ok: bool | None) -> str:
        return "" if ok is None else (" ✓" if ok else " ✗")

    for kid in labels():
        p, s = outcome(kid, "profiled"), outcome(kid, "static")
        forb = lambda o: f" **must-not: {', '.join(o.must_not_hit)}**" if o.must_not_hit else ""  # noqa: E731
        rows.append(f"| {kid} | {p.tier} | {p.bottleneck}{mark(p.bottleneck_ok)} | {p.case} | "
                    f"{', '.join(p.permitted[:3])}{mark(p.first_ok)}{forb(p)} | {s.case} | "
                    f"{', '.join(s.permitted[:3])}{mark(s.first_ok)}{forb(s)} |")
    pa, sa = agreement("profiled"), agreement("static")
    n = len(labels())
    summary = [
        "", f"| mode ({n} kernels) | bottleneck right | first permitted acceptable | top-3 hit | "
        "top-3 overlap | no must-not permitted |", "|---|---|---|---|---|---|",
        f"| with profile | {pa['bottleneck']:.0%} | {pa['first']:.0%} | {pa['top3']:.0%} | "
        f"{pa['top3_overlap']:.0%} | {pa['no_must_not']:.0%} |",
        f"| static-only | - | {sa['first']:.0%} | {sa['top3']:.0%} | {sa['top3_overlap']:.0%} | "
        f"{sa['no_must_not']:.0%} |"]
    return "\n".join(rows + summary)


if __name__ == "__main__":
    import argparse
    import logging

    ap = argparse.ArgumentParser(description="held-out agreement table")
    ap.add_argument("--skills", type=Path, default=SKILLS, help="skills folder for the in-memory KB")
    ap.add_argument("--home", type=Path, default=None, help="query the real store of this kernelskill home")
    args = ap.parse_args()
    SOURCE.update(skills=args.skills, home=args.home)
    logging.disable(logging.WARNING)
    sys.stdout.write(table() + "\n")
