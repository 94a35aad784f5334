"""The linter on small hand-made skill sets: each finding names file, line and a code."""

from __future__ import annotations

import shutil
from pathlib import Path

from kernelskill.kb.lint import expression_names, lint
from kernelskill.kb.loader import load_skills

SMALL = Path(__file__).parent / "data" / "skills_small"


def _lint_with(tmp_path: Path, extra: str, replace: tuple[str, str] | None = None):
    dest = tmp_path / "skills"
    shutil.copytree(SMALL, dest)
    if replace:
        for f in dest.glob("*.yaml"):
            f.write_text(f.read_text().replace(*replace))
    (dest / "extra.yaml").write_text(extra)
    report = lint(load_skills([dest]))
    return report, dest / "extra.yaml"


def _codes(report, severity: str = "error") -> list[str]:
    return [f.code for f in report.findings if f.severity == severity]


def test_small_set_is_clean_of_errors_and_has_expected_warnings() -> None:
    report = lint(load_skills([SMALL]))
    assert report.ok, [str(f) for f in report.errors]
    warn = _codes(report, "warning")
    assert "unused_predicate" in warn  # half_precision
    assert "method_never_permitted" in warn  # cublas_gemm
    assert "coverage_hole" in warn
    unmeasured = [f for f in report.findings if f.code == "method_unmeasured"]
    assert [f.object_id for f in unmeasured] == ["coalesced_access"]  # has an example, never measured
    assert {f.object_id for f in report.findings if f.code == "method_without_example"} >= {"vectorized_access_16b"}
    cell = next(r for r in report.coverage if r.bottleneck == "memory_bandwidth" and r.tier == "tier.high")
    assert cell.counts == {0: 2, 1: 1, 2: 1, 3: 1, 4: 1}
    assert report.holes() == 16


def test_undefined_references(tmp_path: Path) -> None:
    report, extra = _lint_with(tmp_path, """
cases:
  - id: case.broken
    title: Broken
    bottleneck: no_such_bottleneck
    tiers: [tier.nope]
    when: [no_such_predicate]
    methods: [no_such_method]
    rationale: refs
""")
    by_code = {f.code: f for f in report.errors}
    for code in ("undefined_bottleneck", "undefined_tier", "undefined_predicate", "undefined_method"):
        assert code in by_code, code
        assert by_code[code].file == str(extra) and by_code[code].line == 3


def test_expression_whitelist_and_unknown_symbols(tmp_path: Path) -> None:
    report, _ = _lint_with(tmp_path, """
predicates:
  - id: p_attr
    description: attribute access
    expr: dram_throughput_pct.real > 1
  - id: p_call
    description: a call
    expr: __import__('os') == 1
  - id: p_unknown
    description: unknown symbol
    expr: dram_throughput_pct > 1 and warp_magic > 2
""")
    msgs = [f.message for f in report.errors]
    assert any("p_attr" in m and "Attribute" in m for m in msgs)
    assert any("p_call" in m and "not allowed" in m for m in msgs)
    assert any("p_unknown" in m and "warp_magic" in m for m in msgs)
    assert expression_names("defined(a) and b in [1, 2] or -c < max(d, 1)") == {"a", "b", "c", "d"}


def test_cases_that_can_never_match(tmp_path: Path) -> None:
    report, extra = _lint_with(tmp_path, """
predicates:
  - id: dram_low
    description: low DRAM
    expr: dram_throughput_pct < 50
  - id: dram_impossible
    description: beyond the field's max
    expr: dram_throughput_pct > 150
cases:
  - id: case.contradiction
    title: high and low at once
    bottleneck: memory_bandwidth
    when: [dram_bound, dram_low]
    methods: [coalesced_access]
    rationale: x
  - id: case.same_when_unless
    title: when and unless
    bottleneck: memory_bandwidth
    when: [dram_bound]
    unless: [dram_bound]
    methods: [coalesced_access]
    rationale: x
  - id: case.out_of_range
    title: out of range
    bottleneck: memory_bandwidth
    when: [dram_impossible]
    methods: [coalesced_access]
    rationale: x
  - id: case.bad_structure
    title: structure 7
    bottleneck: memory_bandwidth
    structures: [3]
    when: [pointwise_kernel]
    methods: [coalesced_access]
    rationale: pointwise_kernel needs structure 0
""")
    never = {f.object_id for f in report.errors if f.code == "never_matches"}
    assert never == {"case.contradiction", "case.same_when_unless", "case.out_of_range", "case.bad_structure"}
    f = next(f for f in report.errors if f.object_id == "case.contradiction")
    assert f.file == str(extra) and "dram_throughput_pct" in f.message


def test_tier_overlap_and_gap(tmp_path: Path) -> None:
    report, _ = _lint_with(tmp_path, "", replace=("    lower: 60\n    upper: 80\n", "    lower: 65\n    upper: 85\n"))
    assert "tier_overlap" in _codes(report)  # tier.mid [65, 85) overlaps tier.low [80, ...)
    assert "tier_gap" in _codes(report, "warning")  # nothing covers [60, 65)


def test_duplicate_ids_surface_as_lint_errors(tmp_path: Path) -> None:
    from kernelskill.kb.curate import lint_sources

    class S:  # the two settings attributes lint_sources reads
        kb_dir = tmp_path / "kb"
        user_skills_dir = tmp_path / "user"

    S.user_skills_dir.mkdir()
    (S.user_skills_dir / "dup.yaml").write_text(
        "predicates:\n  - id: dram_bound\n    description: other\n    expr: dram_throughput_pct > 1\n")
    report = lint_sources(S, bundled=SMALL)
    assert report.errors[0].code == "duplicate_id" and report.errors[0].line == 2


def test_evidence_of_another_task_is_flagged(tmp_path: Path) -> None:
    report, _ = _lint_with(tmp_path, "", replace=(
        "      after: examples/coalesced_access/after.py\n",
        "      after: examples/coalesced_access/after.py\n    evidence:\n      - task: examples/other/task.py\n"
        "        before_ms: 2.0\n        after_ms: 1.0\n        date: 2026-12-02\n"))
    [finding] = [f for f in report.findings if f.code == "evidence_other_task"]
    assert finding.object_id == "coalesced_access" and "examples/other/task.py" in finding.message
    assert "method_unmeasured" not in _codes(report, "warning")
