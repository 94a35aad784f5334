"""The YAML loader: every bad input is one line naming file and line; hashing is order-independent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kernelskill.errors import KernelskillError
from kernelskill.kb.loader import load_report, load_skills

SMALL = Path(__file__).parent / "data" / "skills_small"


def _copy_small(tmp_path: Path) -> Path:
    dest = tmp_path / "skills"
    shutil.copytree(SMALL, dest)
    return dest


def _error(paths: list[Path]) -> str:
    with pytest.raises(KernelskillError) as info:
        load_skills(paths)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_small_set_loads_every_type() -> None:
    skills = load_skills([SMALL])
    counts = skills.counts()
    assert all(counts[k] > 0 for k in counts), counts
    # one generated guidance doc per method, plus the hand-written case study
    assert skills.generated == {f"doc.{m.id}" for m in skills.methods}
    doc = skills.by_id("doc.coalesced_access")
    assert doc.kind == "guidance" and doc.method == "coalesced_access"
    assert "Pitfalls:" in doc.text and "Preconditions:" in doc.text
    assert skills.by_id("case.compute_gemm").evidence[0].speedup == 4.0
    assert skills.by_id("nope") is None
    assert skills.locations["case.mem_pointwise"].line == 2


def test_hash_ignores_file_and_item_order(tmp_path: Path) -> None:
    base = load_skills([SMALL]).content_hash()
    dest = _copy_small(tmp_path)
    data = yaml.safe_load((dest / "cases.yaml").read_text())
    data["cases"].reverse()
    (dest / "cases.yaml").unlink()
    (dest / "zz_cases_reversed.yaml").write_text(yaml.safe_dump(data, sort_keys=True))
    assert load_skills([dest]).content_hash() == base
    # ...and changes with content
    text = (dest / "rules.yaml").read_text().replace("dram_throughput_pct >= 80", "dram_throughput_pct >= 81")
    (dest / "rules.yaml").write_text(text)
    assert load_skills([dest]).content_hash() != base


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("predicates:\n  - id: p_one\n    description: x\n    expr: a >= 1\n  - id: [unclosed\n")
    msg = _error([bad])
    assert msg.startswith(f"{bad}:") and "YAML syntax error" in msg
    line = int(msg.split(":")[1])
    assert line in (5, 6)


def test_schema_violation_points_at_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "tiers:\n"
        "  - id: tier.ok\n    name: A\n    description: fine\n    upper: 10\n"
        "  - id: tier.bad\n    name: B\n    description: bad bound\n    lower: oops\n"
    )
    msg = _error([bad])
    assert msg.startswith(f"{bad}:9:"), msg
    assert "tiers[1] (tier.bad)" in msg and "lower" in msg


def test_missing_required_field_points_at_the_item(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("methods:\n  - id: m_one\n    name: M\n    category: memory\n")
    msg = _error([bad])
    assert msg.startswith(f"{bad}:2:") and "required field missing" in msg


def test_unknown_key_and_unknown_section(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("predicates:\n  - id: p_one\n    description: x\n    expr: a >= 1\n    colour: red\n")
    msg = _error([bad])
    assert msg.startswith(f"{bad}:5:") and "colour: unknown key" in msg
    bad.write_text("predicates: []\nrecipes:\n  - id: r\n")
    msg = _error([bad])
    assert msg.startswith(f"{bad}:2:") and "unknown section 'recipes'" in msg


def test_duplicate_id_names_both_places(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text("predicates:\n  - id: p_one\n    description: x\n    expr: a >= 1\n")
    b.write_text("vetoes: []\npredicates:\n  - id: p_one\n    description: y\n    expr: a >= 2\n")
    msg = _error([tmp_path])
    assert msg.startswith(f"{b}:3:") and f"also defined at {a}:2" in msg


def test_missing_example_file_is_an_error(tmp_path: Path) -> None:
    dest = _copy_small(tmp_path)
    (dest / "examples" / "coalesced_access" / "after.py").unlink()
    msg = _error([dest])
    assert "example.after: file not found: examples/coalesced_access/after.py" in msg
    assert msg.startswith(str(dest / "methods.yaml") + ":2:")


def test_examples_folder_is_skipped_and_report_collects_all(tmp_path: Path) -> None:
    dest = _copy_small(tmp_path)
    (dest / "examples" / "junk.yaml").write_text("not: [valid")  # never read
    assert load_skills([dest]).counts()["methods"] == 4
    (dest / "x.yaml").write_text("predicates:\n  - id: Bad Id\n    description: x\n    expr: a\n")
    (dest / "y.yaml").write_text("cases: 3\n")
    _, issues = load_report([[dest]])
    assert [i.code for i in issues] == ["schema", "shape"]
    assert all(str(i).count(":") >= 2 for i in issues)


def test_merge_dedups_identical_and_accepts_higher_version(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    shutil.copy(SMALL / "rules.yaml", user / "rules.yaml")  # identical copies: kept once
    skills, issues = load_report([[SMALL], [user]])
    assert not issues and skills.content_hash() == load_skills([SMALL]).content_hash()
    (user / "rules.yaml").write_text(
        "predicates:\n  - id: dram_bound\n    version: 2\n    description: stricter\n"
        "    expr: dram_throughput_pct >= 85\n")
    skills, issues = load_report([[SMALL], [user]])
    assert not issues and skills.by_id("dram_bound").expr.endswith("85")
    (user / "rules.yaml").write_text(
        "predicates:\n  - id: dram_bound\n    description: changed, same version\n    expr: dram_throughput_pct >= 1\n")
    _, issues = load_report([[SMALL], [user]])
    assert issues and "duplicate id 'dram_bound'" in str(issues[0]) and str(SMALL / "rules.yaml") in str(issues[0])
