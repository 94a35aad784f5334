"""What the CLI prints is whole: to a pipe (click's runner: stdout is not a terminal) nothing is wrapped or
cropped, ids and reasons arrive in full; on a narrow terminal run ids are still never shortened. Slow steps
show progress on stderr, one line per stage when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.commands import _common, _progress
from kernelskill.config import load_settings
from kernelskill.pipeline.runs import RunStore
from tests.test_loop_helpers import TASK

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
SMALL = Path(__file__).parent / "data" / "skills_small"


def run(*args: str, code: int = 0) -> tuple[str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stdout, result.stderr


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("bundled_home")
    from kernelskill.kb.home import open_store

    open_store(load_settings(home=home)).close()  # the bundled skills
    return home


def test_query_in_a_pipe_keeps_reasons_and_ids_whole(kb_home: Path) -> None:
    args = ["query", str(EX / "kernels" / "naive_gemm.py"), "--profile", str(EX / "profiles" / "naive_gemm.csv"),
            "--home", str(kb_home)]
    data = json.loads(run(*args, "--json")[0])
    text, _ = run(*args, "--explain")
    lines = text.splitlines()
    assert data["forbidden"], "the example has vetoed methods"
    for f in data["forbidden"]:  # each veto's reason on one line, in full (no cut at 160 characters)
        assert any(f["reason"] in line for line in lines), f["reason"]
    assert any(len(f["reason"]) > 160 for f in data["forbidden"])
    for step in data["trace"]:  # every identifier and expression of the trace unsplit
        assert any(step["id"] in line for line in lines), step["id"]
        if step.get("expr"):
            assert any(step["expr"] in line for line in lines), step["expr"]
    for m in data["permitted"]:  # guidance either whole or cut at a word boundary with an ellipsis
        guide = " ".join((m["guidance"] or "").split())
        shown = next(line for line in lines if guide[:40] in line)
        part = re.search(re.escape(guide[:40]) + r"[^│┃]*", shown).group(0).rstrip()
        assert guide == part or (part.endswith("\u2026") and guide.startswith(part[:-1])
                                 and guide[len(part) - 1] in " ,;:"), part


def test_kb_show_in_a_pipe_is_plain_whole_lines(kb_home: Path) -> None:
    data = json.loads(run("kb", "show", "shared_memory_tiling", "--home", str(kb_home), "--json")[0])
    text, _ = run("kb", "show", "shared_memory_tiling", "--home", str(kb_home))
    guidance = " ".join(data["guidance"].split())
    assert len(guidance) > 80 and any(guidance in " ".join(line.split()) for line in text.splitlines())
    assert "\x1b[" not in text and max(len(line) for line in text.splitlines()) < 2000  # no padding to a width


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, list[str]]:
    home = tmp_path / "home"
    task = tmp_path / "softmax_over_rows_with_a_long_and_descriptive_name.py"
    task.write_text(TASK)
    store = RunStore(load_settings(home=home).runs_dir)
    ids = [store.create(task, {"model": "test-model", "provider": "exchange"}).id for _ in range(2)]
    return home, ids


def test_run_ids_are_never_shortened(two_runs: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    home, ids = two_runs
    assert ids[0] != ids[1] and ids[0][:40] == ids[1][:40] and len(ids[0]) > 50
    piped, _ = run("runs", "list", "--home", str(home))
    assert all(i in piped for i in ids)
    shown, _ = run("runs", "show", ids[0], "--home", str(home))
    assert ids[0] in shown and "no answer yet (exchange)" in shown and "no call yet" not in shown
    # an 80-column terminal: the table keeps its natural width (the terminal wraps the long lines) instead of
    # squeezing columns to nothing or cropping the ids
    monkeypatch.setattr(_common, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")
    narrow, _ = run("runs", "list", "--home", str(home))
    assert all(i in narrow for i in ids) and "verified" in narrow and "…" not in narrow, narrow


def test_kb_init_shows_its_stages_and_its_real_duration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_progress, "QUIET_S", 0.0)  # show every stage, however short
    out, err = run("kb", "init", "--home", str(tmp_path / "home"), "--skills", str(SMALL), "--json")
    report = json.loads(out)
    lines = err.strip().splitlines()
    assert lines[0].startswith("kb init: reading, linting and indexing the skills") and lines[0].endswith("...")
    assert re.match(r"kb init: .*: done in \d+\.\d s$", lines[-1]), lines
    assert report["seconds"] >= report["ingest_seconds"] > 0  # the whole command, not only the store's part
    again, err2 = run("kb", "import", str(SMALL), "--home", str(tmp_path / "home"))
    assert re.search(r"import: KB (updated|unchanged) .*, \d+\.\d s \(ingest \d+\.\d\d s\)$", again.strip()), again
    assert "kb import: reading, linting and ingesting" in err2


def test_quick_stages_say_nothing() -> None:
    stream = io.StringIO()
    with _progress.Progress("demo", stream=stream) as p, p.stage("quick"):
        pass
    assert stream.getvalue() == ""


def test_counters_are_one_line_per_tenth_in_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_progress, "QUIET_S", 0.0)
    stream = io.StringIO()
    with _progress.Progress("demo", stream=stream) as p, p.stage("encoding"):
        for i in range(1, 101):
            p("doc", i, 100)
    lines = stream.getvalue().splitlines()
    counted = [line for line in lines if "[" in line]
    assert counted[0] == "demo: doc [1/100]" and counted[-1] == "demo: doc [100/100]" and len(counted) == 11
    assert lines[-1].startswith("demo: encoding: done in")
