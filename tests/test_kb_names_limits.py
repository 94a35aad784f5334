"""KB hardening (issue 27, failure 9): a skills file's name belongs to one source (refused, never replaced
silently, also when two adds race); the loader bounds numbers, texts and alias expansion; every message
escapes control characters; ``kb doctor`` finds stray temporary files; a skills file deleted by hand never
loses its objects on the next read; one home is one KB however its path is spelled.
Real processes, a real DuckDB file, real Chroma and the bundled embedding model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main

SMALL = Path(__file__).parent / "data" / "skills_small"
OSC_ID = "evil\x1b]0;pwned\x07\nerror: forged"


def _run(*args: str, code: int = 0) -> tuple[str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stdout, result.stderr


def _case_text(cid: str, *, title: str | None = None) -> str:
    return (f"cases:\n  - id: {cid}\n    title: {json.dumps(title or 't ' + cid)}\n    bottleneck: compute_throughput\n"
            "    methods: [tensor_core_mma]\n    rationale: r\n")


def _cases(home: Path) -> set[str]:
    out, _ = _run("kb", "list", "--type", "case", "--home", str(home), "--json")
    return {r["id"] for r in json.loads(out)}


def _doctor(home: Path, *extra: str, code: int = 0) -> dict:
    result = CliRunner().invoke(main, ["kb", "doctor", "--home", str(home), "--json", *extra])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    _run("kb", "init", "--home", str(h), "--skills", str(SMALL))
    return h


def _two_sources(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "c.yaml", tmp_path / "b" / "c.yaml"
    a.write_text(_case_text("case.from_a"))
    b.write_text(_case_text("case.from_b"))
    return a, b


# -- one name, one source ------------------------------------------------------------------------------


def test_same_name_from_another_folder_is_refused(home: Path, tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path)
    _run("kb", "add", str(a), "--home", str(home))
    _, err = _run("kb", "add", str(b), "--home", str(home), code=2)
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: kb add: ") and "'c.yaml'" in line and str(a) in line and "nothing was changed" in line
    assert "case.from_a" in _cases(home) and "case.from_b" not in _cases(home)
    assert (home / "skills" / "c.yaml").read_text() == a.read_text()
    # the same source, edited, is an update (not a conflict)
    a.write_text(_case_text("case.from_a") + _case_text("case.from_a2").removeprefix("cases:\n"))
    _run("kb", "add", str(a), "--home", str(home))
    assert {"case.from_a", "case.from_a2"} <= _cases(home)
    # identical content from anywhere is accepted (nothing to lose)
    twin = tmp_path / "twin"
    twin.mkdir()
    (twin / "c.yaml").write_bytes(a.read_bytes())
    _run("kb", "add", str(twin / "c.yaml"), "--home", str(home))
    assert _doctor(home)["in_sync"] is True


def test_concurrent_adds_of_one_name_keep_one_and_refuse_the_other(home: Path, tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "kernelskill", "kb", "add", str(f), "--home", str(home)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for f in (a, b)]
    results = [(p.wait(timeout=300), p.stderr.read().decode()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert "is taken by" in loser and "Traceback" not in loser
    cases = _cases(home)
    assert len({"case.from_a", "case.from_b"} & cases) == 1  # the winner's, never neither, never silently one
    winner = a if "case.from_a" in cases else b
    assert (home / "skills" / "c.yaml").read_text() == winner.read_text()
    assert _doctor(home)["in_sync"] is True


def test_example_files_of_the_same_relative_name_are_not_replaced(home: Path, tmp_path: Path) -> None:
    """Two methods from different folders whose worked examples share a relative path."""
    def method_file(folder: Path, mid: str, body: str) -> Path:
        ex = folder / "examples" / "shared"
        ex.mkdir(parents=True)
        for name in ("task.py", "before.py", "after.py"):
            (ex / name).write_text(f"# {body} {name}\n")
        path = folder / f"{mid}.yaml"
        path.write_text(f"methods:\n  - id: {mid}\n    name: n\n    category: memory\n    intent: i\n    mechanism: m\n"
                        "    preconditions: p\n    guidance: g\n    bottlenecks: [memory_bandwidth]\n    example:\n"
                        "      task: examples/shared/task.py\n      before: examples/shared/before.py\n"
                        "      after: examples/shared/after.py\n")
        return path

    first = method_file(tmp_path / "one", "meth_one", "one")
    second = method_file(tmp_path / "two", "meth_two", "two")
    _run("kb", "add", str(first), "--home", str(home))
    _, err = _run("kb", "add", str(second), "--home", str(home), code=2)
    assert "examples/shared/" in err and "is taken by" in err
    assert (home / "skills" / "examples" / "shared" / "before.py").read_text() == "# one before.py\n"
    assert not (home / "skills" / "meth_two.yaml").exists()


# -- loader limits ---------------------------------------------------------------------------------------


def _reads_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in (home / "kb" / "reads").iterdir())


@pytest.mark.parametrize("text, message", [
    ("cases:\n  - id: case.big\n    version: " + "9" * 5000 + "\n    title: t\n", "a number of 5,000 digits"),
    ("cases:\n  - id: case.big\n    version: " + "9" * 30 + "\n" + _case_text("x").split("\n", 2)[2]
     .replace("    title: \"t x\"\n", "    title: t\n"), "version: Input should be less than or equal to 1000000"),
    ("cases:\n  - id: case.big\n    title: " + "x" * 70_000 + "\n", "a value of 70,000 characters"),
], ids=["5000-digit version", "30-digit version", "70k-character title"])
def test_numbers_and_texts_are_bounded(home: Path, tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(text)
    before = _reads_bytes(home)
    _, err = _run("kb", "add", str(path), "--home", str(home), code=2)
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) <= 3
    assert err.strip().splitlines()[-1].startswith(f"error: {path}:")
    assert _reads_bytes(home) == before and not (home / "skills" / "big.yaml").exists()


@pytest.mark.parametrize("scalar_chars, message", [(1_500_000, "a value of 1,500,000 characters"),
                                                   (60_000, "characters through YAML aliases")])
def test_a_large_scalar_aliased_into_many_cases_is_refused(home: Path, tmp_path: Path, scalar_chars: int,
                                                           message: str) -> None:
    body = "cases:\n" + _case_text("case.a0").split("\n", 1)[1].replace('"t case.a0"', "&big " + "x" * scalar_chars)
    for i in range(1, 150):
        body += _case_text(f"case.a{i}").split("\n", 1)[1].replace(f'"t case.a{i}"', "*big")
    path = tmp_path / "aliases.yaml"
    path.write_text(body)
    before = _reads_bytes(home)
    _, err = _run("kb", "add", str(path), "--home", str(home), code=2)
    assert message in err and "Traceback" not in err
    assert _reads_bytes(home) == before and "case.a1" not in _cases(home)


# -- control characters --------------------------------------------------------------------------------


def test_an_id_with_an_escape_and_a_newline_cannot_forge_a_line(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "osc.yaml"
    path.write_text(f"cases:\n  - id: {json.dumps(OSC_ID)}\n    title: t\n")
    proc = subprocess.run([sys.executable, "-m", "kernelskill", "kb", "add", str(path), "--home", str(home)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert "evil\\x1b]0;pwned\\x07\\nerror: forged" in errors[0]
    # kb lint over a user folder holding that file: the finding is escaped too
    (home / "skills").mkdir(exist_ok=True)
    (home / "skills" / "osc.yaml").write_text(path.read_text())
    lint = subprocess.run([sys.executable, "-m", "kernelskill", "kb", "lint", "--home", str(home)],
                          capture_output=True, text=True, timeout=300)
    assert lint.returncode == 1 and "\x1b" not in lint.stdout and "\\x1b" in lint.stdout


def test_listings_escape_control_characters_and_markup(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "titles.yaml"
    path.write_text(_case_text("case.loud", title="\x1b]0;pwned\x07[red]x[/red]\nsecond line"))
    _run("kb", "add", str(path), "--home", str(home))
    out, _ = _run("kb", "list", "--type", "case", "--home", str(home))
    row = next(line for line in out.splitlines() if "case.loud" in line)
    assert "\x1b" not in out and "\\x1b]0;pwned\\x07[red]x[/red]\\nsecond line" in row
    out, _ = _run("kb", "show", "case.loud", "--home", str(home))
    assert "\x1b" not in out and "\x07" not in out
    as_json, _ = _run("kb", "show", "case.loud", "--home", str(home), "--json")
    assert json.loads(as_json)["title"].startswith("\x1b]0;pwned")  # the data itself is kept as written


def test_kernelskill_error_is_one_printable_line() -> None:
    from kernelskill.errors import KernelskillError, printable

    assert str(KernelskillError("a\nb\x1b[2Jc\u202ed")) == "a\\nb\\x1b[2Jc\\u202ed"
    assert printable(printable("x\r\ty")) == printable("x\r\ty") == "x\\r\\ty"
    assert printable("naïve — 中文 ok") == "naïve — 中文 ok"


# -- doctor: stray temporary files; a skills file deleted by hand ---------------------------------------------


def test_doctor_reports_and_removes_stray_temp_files(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "c1.yaml"
    path.write_text(_case_text("case.c1"))
    _run("kb", "add", str(path), "--home", str(home))
    stray = [home / "skills" / ".c1.yaml.0f3e9a.tmp", home / "skills" / "examples" / ".before.py.77aa.tmp"]
    for p in stray:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("half written")
    report = _doctor(home, code=1)
    assert report["stray_temp_files"] == sorted(str(p) for p in stray) and report["in_sync"] is False
    out = CliRunner().invoke(main, ["kb", "doctor", "--home", str(home)]).stdout
    assert "2 temporary files left by a killed write" in out
    _doctor(home, "--repair")
    assert not any(p.exists() for p in stray)
    assert _doctor(home)["in_sync"] is True and "case.c1" in _cases(home)


def test_a_skills_file_deleted_by_hand_is_recovered_on_the_next_read(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "gone.yaml"
    path.write_text(_case_text("case.gone1") + _case_text("case.gone2").removeprefix("cases:\n"))
    _run("kb", "add", str(path), "--home", str(home))
    (home / "skills" / "gone.yaml").unlink()
    proc = subprocess.run([sys.executable, "-m", "kernelskill", "kb", "list", "--type", "case", "--json",
                           "--home", str(home)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0
    assert {"case.gone1", "case.gone2"} <= {r["id"] for r in json.loads(proc.stdout)}
    recovered = list((home / "skills").glob("recovered-*.yaml"))
    assert len(recovered) == 1 and "case.gone1" in recovered[0].read_text() and "case.gone2" in recovered[0].read_text()
    assert "written back to" in proc.stderr and "kb remove" in proc.stderr
    listed = {r["id"]: r["location"] for r in json.loads(proc.stdout)}
    assert listed["case.gone1"].startswith(str(recovered[0])) or listed["case.gone1"].startswith(
        str(recovered[0].resolve()))  # the KB says where the object lives now
    _run("kb", "init", "--home", str(home))  # an explicit rebuild keeps them too (their file is there now)
    assert {"case.gone1", "case.gone2"} <= _cases(home) and _doctor(home)["in_sync"] is True
    # removing is 'kb remove', which also deletes the recovered file once it holds nothing
    _run("kb", "remove", "case.gone1", "case.gone2", "--home", str(home))
    assert not recovered[0].exists() and not {"case.gone1", "case.gone2"} & _cases(home)


# -- one home, one KB ----------------------------------------------------------------------------------------


def test_one_home_is_one_kb_however_it_is_spelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _run("kb", "init", "--home", "base", "--skills", str(SMALL))
    os.symlink(tmp_path / "base", tmp_path / "link")
    versions = sorted((tmp_path / "base" / "kb").rglob("*.duckdb"))
    for spelling in ("base", str(tmp_path / "base"), "link", "./base/../base", "base"):
        proc = subprocess.run([sys.executable, "-m", "kernelskill", "kb", "stats", "--json", "--home", spelling],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0 and "rebuilding" not in proc.stderr, (spelling, proc.stderr)
    assert sorted((tmp_path / "base" / "kb").rglob("*.duckdb")) == versions
