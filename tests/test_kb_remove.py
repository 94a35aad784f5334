"""Everyday KB curation (issue 30): ``kb remove ID`` (object and skills-file entry, all or nothing; bundled
objects refused); ``kb add`` of a case naming an undefined method names that method; ``kb import`` into a
new home shows its first build and reports what it did and the real time.
Real CLI, real DuckDB, real Chroma, the bundled embedding model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main

SMALL = Path(__file__).parent / "data" / "skills_small"

TWO_CASES = """# my cases (this comment stays)
cases:
  - id: case.keep
    title: kept
    bottleneck: compute_throughput
    methods: [tensor_core_mma]
    rationale: r
  # the one to remove
  - id: case.drop
    title: dropped
    bottleneck: compute_throughput
    methods: [tensor_core_mma]
    rationale: r
"""


def _run(*args: str, code: int = 0) -> tuple[str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stdout, result.stderr


def _ids(home: Path, type_: str) -> set[str]:
    out, _ = _run("kb", "list", "--type", type_, "--home", str(home), "--json")
    return {r["id"] for r in json.loads(out)}


def _hash(home: Path) -> str:
    out, _ = _run("kb", "stats", "--home", str(home), "--json")
    return json.loads(out)["content_hash"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    _run("kb", "init", "--home", str(h), "--skills", str(SMALL))
    return h


def test_remove_edits_the_file_then_deletes_it_when_empty(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "mine.yaml"
    src.write_text(TWO_CASES)
    _run("kb", "add", str(src), "--home", str(home))
    out, _ = _run("kb", "remove", "case.drop", "--home", str(home), "--json")
    data = json.loads(out)
    kept_file = home / "skills" / "mine.yaml"
    assert data["removed"] == ["case.drop"] and data["files"] == {str(kept_file): "edited"} and data["changed"]
    text = kept_file.read_text()
    assert "case.keep" in text and "case.drop" not in text and "# my cases (this comment stays)" in text
    assert "case.keep" in _ids(home, "case") and "case.drop" not in _ids(home, "case")
    out, _ = _run("kb", "remove", "case.keep", "--home", str(home))
    assert "deleted" in out and "removed case.keep" in out
    assert not kept_file.exists() and "case.keep" not in _ids(home, "case")
    _run("kb", "init", "--home", str(home))  # a rebuild does not bring anything back
    assert not {"case.keep", "case.drop"} & _ids(home, "case")
    doctor = json.loads(CliRunner().invoke(main, ["kb", "doctor", "--home", str(home), "--json"]).stdout)
    assert doctor["in_sync"] is True


def test_remove_refuses_bundled_unknown_generated_and_dangling(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "m.yaml"
    src.write_text("methods:\n  - id: my_method\n    name: n\n    category: memory\n    intent: i\n    mechanism: m\n"
                   "    preconditions: p\n    guidance: g\n    bottlenecks: [memory_bandwidth]\n"
                   "cases:\n  - id: case.uses_it\n    title: t\n    bottleneck: memory_bandwidth\n"
                   "    methods: [my_method, coalesced_access]\n    rationale: r\n")
    _run("kb", "add", str(src), "--home", str(home))
    before = (_hash(home), (home / "skills" / "m.yaml").read_text())
    for args, needle in [(("case.mem_any",), "is bundled"), (("case.nope",), "no KB object with id 'case.nope'"),
                         (("doc.my_method",), "generated from method 'my_method'"),
                         (("my_method",), "case.uses_it: method 'my_method' is not defined"),
                         (("case.uses_it", "case.nope"), "no KB object with id 'case.nope'")]:
        _, err = _run("kb", "remove", *args, "--home", str(home), code=2)
        assert needle in err and err.strip().splitlines()[-1].startswith("error: kb remove: "), err
        assert (_hash(home), (home / "skills" / "m.yaml").read_text()) == before  # nothing changed
    # both together are consistent: removed as one unit, the file goes
    _run("kb", "remove", "my_method", "case.uses_it", "--home", str(home))
    assert not (home / "skills" / "m.yaml").exists()
    assert "my_method" not in _ids(home, "method") and "doc.my_method" not in _ids(home, "doc")


def test_remove_that_dies_before_the_switch_leaves_file_and_kb_as_they_were(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "mine.yaml"
    src.write_text(TWO_CASES)
    _run("kb", "add", str(src), "--home", str(home))
    before = (_hash(home), (home / "skills" / "mine.yaml").read_text())
    kill = ("import os, sys\nfrom kernelskill.kb import store\nfrom kernelskill.cli import main\n"
            "store.KBStore._write_duckdb = lambda self, s, h: os._exit(9)\nsys.argv[0] = 'kernelskill'\nmain()\n")
    proc = subprocess.run([sys.executable, "-c", kill, "kb", "remove", "case.drop", "--home", str(home)],
                          capture_output=True, timeout=300)
    assert proc.returncode == 9
    _run("kb", "doctor", "--home", str(home), "--repair")  # finishes or undoes the interrupted write
    assert (_hash(home), (home / "skills" / "mine.yaml").read_text()) == before
    assert {"case.keep", "case.drop"} <= _ids(home, "case")


def test_add_names_the_undefined_method_not_a_dead_end(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "typo.yaml"
    src.write_text("cases:\n  - id: case.typo\n    title: t\n    bottleneck: memory_bandwidth\n"
                   "    methods: [coalesced_access, coalesced_acess]\n    rationale: r\n")
    _, err = _run("kb", "add", str(src), "--home", str(home), code=2)
    line = err.strip().splitlines()[-1]
    assert "method 'coalesced_acess' is not defined" in line and "dead end" not in line.split("(and")[0]


def test_import_into_a_new_home_shows_the_build_and_the_real_time(home: Path, tmp_path: Path) -> None:
    export = tmp_path / "export"
    _run("kb", "export", str(export), "--home", str(home))
    fresh = tmp_path / "fresh"
    proc = subprocess.run([sys.executable, "-m", "kernelskill", "kb", "import", str(export), "--home", str(fresh),
                           "--skills", str(SMALL)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    # progress on stderr (a pipe: one line when a stage starts, one when it ends)
    assert "kb import: first use of this home: building the KB from its base skills" in proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("import: first use of this home: KB built from its base skills")
    assert re.search(r", \d+\.\d s \(ingest \d+\.\d\d s\)$", lines[-1]) and "KB unchanged" not in proc.stdout
    again = subprocess.run([sys.executable, "-m", "kernelskill", "kb", "import", str(export), "--home", str(fresh),
                            "--json"], capture_output=True, text=True, timeout=600)
    data = json.loads(again.stdout)
    assert data["built"] is None and data["changed"] is False and data["new_objects"] == 0
    first = subprocess.run([sys.executable, "-m", "kernelskill", "kb", "import", str(export), "--home",
                            str(tmp_path / "third"), "--skills", str(SMALL), "--json"],
                           capture_output=True, text=True, timeout=600)
    data = json.loads(first.stdout)
    assert data["built"]["changed"] is True  # the first build is reported, and counted in the wall time
    assert data["seconds"] >= data["built"]["seconds"]


@pytest.mark.parametrize("text, left", [
    ("cases: [{id: a.b, title: t}, {id: c.d, title: u}]\n", "cases:\n- id: c.d\n  title: u\n"),
    ("cases:\n  -\n    id: a.b\n    title: t\n  -\n    id: c.d\n    title: u\n", "cases:\n  -\n    id: c.d\n    title: u\n"),
    ("cases:\n- id: c.d\n  title: u\n- id: a.b\n  title: t", "cases:\n- id: c.d\n  title: u\n"),
], ids=["flow list", "dash on its own line", "last item without a newline"])
def test_the_skills_file_editor_cuts_exactly_the_item(text: str, left: str) -> None:
    from kernelskill.kb.skill_edit import text_without

    assert text_without(text, {"a.b"}) == left
    assert text_without(text, {"a.b", "c.d"}) is None
