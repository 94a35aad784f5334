"""``kernelskill kb ...`` end to end through click, with a real home folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main

SMALL = Path(__file__).parent / "data" / "skills_small"


def _run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.stdout if code == 0 else result.stderr


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    _run("kb", "init", "--home", str(h), "--skills", str(SMALL))
    return h


def _stats(home: Path) -> dict:
    return json.loads(_run("kb", "stats", "--home", str(home), "--json"))


def test_init_stats_list_show_search(home: Path) -> None:
    stats = _stats(home)
    assert stats["counts"]["cases"] == 4 and stats["chroma"]["in_sync"]
    # one method of the small set has a worked example, none has been measured
    assert stats["backing"] == {"methods": stats["counts"]["methods"], "with_example": 1, "measured": 0, "pays": 0,
                                "no_gain": 0, "slower": 0}
    again = json.loads(_run("kb", "init", "--home", str(home), "--json"))
    assert again["changed"] is False
    rows = json.loads(_run("kb", "list", "--home", str(home), "--type", "case", "--bottleneck",
                           "memory_bandwidth", "--json"))
    assert [r["id"] for r in rows] == ["case.mem_any", "case.mem_pointwise"]
    shown = json.loads(_run("kb", "show", "case.compute_gemm", "--home", str(home), "--json"))
    assert shown["type"] == "case" and shown["source"].endswith("cases.yaml:18")
    assert "case.compute_gemm" in _run("kb", "show", "case.compute_gemm", "--home", str(home))
    hits = json.loads(_run("kb", "search", "shared memory transpose tile", "-k", "2", "--home", str(home), "--json"))
    assert hits[0]["id"] == "doc.case_study.transpose" and len(hits) == 2
    assert "rank" in _run("kb", "search", "gemm", "--home", str(home))
    assert "unknown" not in _run("kb", "stats", "--home", str(home))
    err = _run("kb", "show", "nope", "--home", str(home), code=2)
    assert err.strip() == "error: no KB object with id 'nope' (see 'kernelskill kb list')"


@pytest.mark.parametrize("name,body,where", [
    ("syntax.yaml", "cases:\n  - id: c\n    title: [oops\n", "syntax.yaml:4:"),
    ("schema.yaml", "predicates:\n  - id: p_x\n    description: d\n    expr: dram_throughput_pct > 1\n"
                    "    extra_key: 1\n", "schema.yaml:5:"),
    ("unknown_pred.yaml", "cases:\n  - id: case.new\n    title: t\n    bottleneck: memory_bandwidth\n"
                          "    when: [no_such_predicate]\n    methods: [coalesced_access]\n    rationale: r\n",
     "unknown_pred.yaml:2:"),
    ("dup.yaml", "predicates:\n  - id: dram_bound\n    description: d\n    expr: dram_throughput_pct > 1\n",
     "dup.yaml:2:"),
])
def test_malformed_add_is_one_line_and_changes_nothing(home: Path, tmp_path: Path, name: str, body: str,
                                                       where: str) -> None:
    before = _stats(home)
    bad = tmp_path / name
    bad.write_text(body)
    err = _run("kb", "add", str(bad), "--home", str(home), code=2)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and where in lines[0], err
    assert _stats(home) == before
    assert not (home / "skills" / name).exists()


def test_add_keeps_the_file_and_survives_reinit(home: Path, tmp_path: Path) -> None:
    new = tmp_path / "mine.yaml"
    new.write_text("cases:\n  - id: case.compute_any\n    title: Any compute-bound kernel\n"
                   "    bottleneck: compute_throughput\n    methods: [tensor_core_mma]\n    rationale: r\n")
    out = json.loads(_run("kb", "add", str(new), "--home", str(home), "--json"))
    assert out["changed"] and out["counts"]["cases"] == 5
    assert (home / "skills" / "mine.yaml").is_file()
    again = json.loads(_run("kb", "init", "--home", str(home), "--json"))
    assert again["changed"] is False and again["counts"]["cases"] == 5
    # editing the same file again replaces the kept copy instead of clashing with it
    new.write_text(new.read_text().replace("Any compute-bound kernel", "Any compute-bound kernel (v2)"))
    assert json.loads(_run("kb", "add", str(new), "--home", str(home), "--json"))["changed"]


def test_export_import_round_trip_lint_coverage_doctor(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "exported"
    _run("kb", "export", str(out), "--home", str(home))
    other = tmp_path / "other"
    imported = json.loads(_run("kb", "import", str(out), "--home", str(other), "--skills", str(SMALL), "--json"))
    assert imported["content_hash"] == _stats(home)["content_hash"] == _stats(other)["content_hash"]
    lint = json.loads(_run("kb", "lint", "--home", str(home), "--json"))
    assert lint["ok"] and lint["errors"] == 0 and lint["warnings"] > 0
    _run("kb", "lint", "--home", str(home), "--strict", code=1)
    cov = json.loads(_run("kb", "coverage", "--home", str(home), "--json"))
    assert cov["holes"] == 16 and cov["structures"] == [0, 1, 2, 3, 4]
    doc = json.loads(_run("kb", "doctor", "--home", str(home), "--json"))
    assert doc["in_sync"]
    from kernelskill.kb.store import KBStore

    KBStore.open(home / "kb")._coll().delete(ids=["doc.cublas_gemm"])
    _run("kb", "doctor", "--home", str(home), code=1)
    fixed = json.loads(_run("kb", "doctor", "--repair", "--home", str(home), "--json"))
    assert fixed["repaired"] and json.loads(_run("kb", "doctor", "--home", str(home), "--json"))["in_sync"]


def test_add_copies_worked_examples_with_the_file(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "contrib"
    (src / "examples" / "my_method").mkdir(parents=True)
    for name in ("task.py", "before.py", "after.py"):
        (src / "examples" / "my_method" / name).write_text("# example\n")
    (src / "my_method.yaml").write_text(
        "methods:\n  - id: my_method\n    name: Mine\n    category: memory\n    intent: i\n    mechanism: m\n"
        "    preconditions: p\n    guidance: g\n    example:\n      task: examples/my_method/task.py\n"
        "      before: examples/my_method/before.py\n      after: examples/my_method/after.py\n"
        "cases:\n  - id: case.mine\n    title: Mine\n    bottleneck: memory_bandwidth\n    methods: [my_method]\n"
        "    rationale: r\n")
    out = json.loads(_run("kb", "add", str(src / "my_method.yaml"), "--home", str(home), "--json"))
    assert out["changed"] and out["counts"]["methods"] == 5
    assert (home / "skills" / "examples" / "my_method" / "after.py").is_file()
    assert json.loads(_run("kb", "init", "--home", str(home), "--json"))["changed"] is False
    shown = json.loads(_run("kb", "show", "doc.my_method", "--home", str(home), "--json"))
    assert shown["method"] == "my_method"


def test_a_kb_older_than_its_skills_is_rebuilt_on_open(tmp_path) -> None:
    """An upgrade (or a hand edit) of the skills the KB was built from is picked up on the next open."""
    import shutil

    from kernelskill.config import load_settings
    from kernelskill.kb.curate import init_kb, kb_is_stale
    from kernelskill.kb.home import open_store

    skills = tmp_path / "skills"
    shutil.copytree(SMALL, skills)
    settings = load_settings(home=tmp_path / "home", environ={})
    init_kb(settings, bundled=skills)
    assert not kb_is_stale(settings)
    before = open_store(settings, read_only=True).content_hash()
    fields = skills / "fields.yaml"
    fields.write_text(fields.read_text() + "\n# a comment only\n")
    assert kb_is_stale(settings)
    assert open_store(settings, read_only=True).content_hash() == before  # same content, nothing written
    assert not kb_is_stale(settings)
    fields.write_text(fields.read_text().replace("Every output element depends on one input element.",
                                                 "Each output element reads one input element."))
    after = open_store(settings, read_only=True)
    assert after.content_hash() != before
    assert "reads one input element" in after.get("is_pointwise").description
