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
    data = json.loads(run(*args, "--json", "--explain")[0])
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
    for m in data["permitted"]:  # every guidance whole, on one line of its cell
        guide = " ".join((m["guidance"] or "").split())
        shown = next(line for line in lines if guide[:40] in line)
        part = re.search(re.escape(guide[:40]) + r"[^│┃]*", shown).group(0).rstrip()
        assert guide == part, part


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


# ---------------------------------------------------------------------------------------- query: whole answers
GEMM_ARGS = (str(EX / "kernels" / "naive_gemm.py"), "--profile", str(EX / "profiles" / "naive_gemm.csv"))


def test_a_piped_query_is_never_cut(kb_home: Path) -> None:
    """`kernelskill query ... | cat`: a real process writing into a real pipe; no cell ends in an ellipsis and
    every guidance and worked-example path arrives whole."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-m", "kernelskill", "query", *GEMM_ARGS, "--home", str(kb_home)],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "\u2026" not in proc.stdout
    data = json.loads(run("query", *GEMM_ARGS, "--home", str(kb_home), "--json")[0])
    flat = " ".join(proc.stdout.split())
    for m in data["permitted"]:
        assert " ".join(m["guidance"].split()) in flat, m["id"]
        after = next(e for e in m["examples"] if e.endswith("after.py"))
        assert str(Path(after).resolve().relative_to(ROOT)) in proc.stdout, after


def _column_cells(text: str, title: str, column: int) -> list[str]:
    """The cells of one column of a rich table on a terminal, each row's folded lines joined."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    cells: list[str] = []
    for line in lines[start:]:
        if line.startswith("└"):
            break
        parts = line.split("│")
        if len(parts) < column + 2:
            continue
        if parts[1].strip():  # the first column (#) starts a row
            cells.append("")
        if cells:
            cells[-1] += parts[column + 1].strip()
    return cells


def test_query_on_a_120_column_terminal_wraps_paths_instead_of_cutting_them(
        kb_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "120")
    text, _ = run("query", *GEMM_ARGS, "--home", str(kb_home))
    data = json.loads(run("query", *GEMM_ARGS, "--home", str(kb_home), "--json")[0])
    assert max(len(line) for line in text.splitlines()) <= 120
    examples = _column_cells(text, "permitted methods", 3)
    assert len(examples) == len(data["permitted"])
    for m, cell in zip(data["permitted"], examples, strict=True):
        after = next(e for e in m["examples"] if e.endswith("after.py"))
        assert cell.startswith(str(Path(after).resolve().relative_to(ROOT))), (after, cell)
    assert "guidance summarised here" in text  # the terminal's summary says where the whole text is


def test_query_json_carries_the_trace_only_with_explain(kb_home: Path) -> None:
    plain = json.loads(run("query", *GEMM_ARGS, "--home", str(kb_home), "--json")[0])
    full = json.loads(run("query", *GEMM_ARGS, "--home", str(kb_home), "--json", "--explain")[0])
    assert "trace" not in plain and len(full["trace"]) > 20
    def rest(d: dict) -> dict:
        return {k: v for k, v in d.items() if k not in ("trace", "timings_ms")}

    assert rest(full) == rest(plain)


def test_query_protocol_asks_what_the_loop_asks_under_that_protocol(kb_home: Path) -> None:
    """`query --protocol kernelbench` and the optimize loop's retriever (the adapter the loop calls, with the
    run's protocol) permit and forbid the same methods, in the same order; under `strict` cuBLAS is vetoed."""
    from kernelskill.pipeline.loop.adapters import KBRetriever

    kernel, task = EX / "kernels" / "naive_gemm.py", EX / "tasks" / "naive_gemm_task.py"
    profile = EX / "profiles" / "naive_gemm.csv"
    retriever = KBRetriever(load_settings(home=kb_home))
    mine = kb_home / "loose.toml"  # a protocol file: the kernelbench preset with looser fp32 tolerances
    mine.write_text('base = "kernelbench"\n[tolerances]\nfp32 = [1e-2, 1e-2]\n')
    seen = {}
    for protocol in ("kernelbench", "strict", str(mine)):
        cli = json.loads(run("query", str(kernel), "--task", str(task), "--profile", str(profile),
                             "--protocol", protocol, "--home", str(kb_home), "--json")[0])
        loop = retriever.query(kernel, task=task, profile=profile, protocol=protocol)
        assert [m["id"] for m in cli["permitted"]] == [m["id"] for m in loop["permitted"]], protocol
        assert [f["id"] for f in cli["forbidden"]] == [f["id"] for f in loop["forbidden"]], protocol
        seen[protocol] = [m["id"] for m in cli["permitted"]]
    assert "cublas_gemm" in seen["kernelbench"] and "cublas_gemm" not in seen["strict"]
    assert "cublas_gemm" in seen[str(mine)]
    _, err = run("query", str(kernel), "--protocol", "no_such_protocol", "--home", str(kb_home), code=2)
    assert err.count("\n") == 1 and "no_such_protocol" in err
