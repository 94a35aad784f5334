"""``runs import`` is all or nothing: a refused archive (a bad event line, a member over the caps, a run id
with terminal escapes) leaves no trace, the error is one line with every name escaped for display, and
the runs already there keep working (``runs list``, ``runs resume --all``)."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from kernelskill.pipeline.runs import portable
from kernelskill.pipeline.runs.portable import PortabilityError, import_run
from tests.test_loop_helpers import TASK
from tests.test_split import PLUGINS, ks


@pytest.fixture
def exchange_run(tmp_path: Path) -> tuple[str, Path]:
    """A real run paused at its first LLM step, in its home."""
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    home = tmp_path / "home"
    out = ks("optimize", str(task), "--rounds", "1", "--llm", "exchange", "--home", str(home), *PLUGINS,
             env={"OPENAI_API_KEY": "", "KERNELSKILL_LLM_API_KEY": ""})
    assert out.exit_code == 3, out.output
    return str(home), next((home / "runs").iterdir())


def _tar(folder: Path, archive: Path, top: str) -> Path:
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=f"{top}/{path.relative_to(folder).as_posix()}", recursive=False)
    return archive


def _listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


def _one_error_line(out) -> str:
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.output, out.output
    return lines[0]


def test_archive_with_a_bad_event_line_leaves_no_trace(exchange_run, tmp_path: Path) -> None:
    home, run_dir = exchange_run
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    lines = (copy / "events.jsonl").read_text().splitlines()
    lines.insert(1, '{"seq": 2, "type": "llm_call", "data": {"text": "cut')  # not JSON, and not the last line
    (copy / "events.jsonl").write_text("\n".join(lines) + "\n")
    archive = _tar(copy, tmp_path / "bad.tar.gz", "other-run-1")
    runs_dir = Path(home) / "runs"
    before = _listing(runs_dir)
    line = _one_error_line(ks("runs", "import", str(archive), "--home", home))
    assert "events.jsonl:2" in line
    assert _listing(runs_dir) == before  # no run folder, no staging folder
    listed = ks("runs", "list", "--home", home, "--json")
    assert listed.exit_code == 0 and [r["id"] for r in json.loads(listed.output)] == [run_dir.name]
    # into a runs folder that does not exist yet: it is not created either
    fresh = tmp_path / "fresh" / "runs"
    _one_error_line(ks("runs", "import", str(archive), "--into", str(fresh)))
    assert not (tmp_path / "fresh").exists()


def _archive(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_member_size_count_and_total_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(portable, "MAX_MEMBER_BYTES", 2**20)
    monkeypatch.setattr(portable, "MAX_TOTAL_BYTES", 3 * 2**20)
    monkeypatch.setattr(portable, "MAX_MEMBERS", 50)
    run_json = json.dumps({"id": "r"}).encode()
    cases = {
        "member": [("r/run.json", run_json), ("r/blob.bin", bytes(3 * 2**20))],  # compresses to a few kB
        "total": [("r/run.json", run_json)] + [(f"r/part{i}.bin", bytes(2**20 - 1)) for i in range(4)],
        "count": [("r/run.json", run_json)] + [(f"r/f{i}.txt", b"x") for i in range(60)],
    }
    runs_dir = tmp_path / "runs"
    for name, members in cases.items():
        archive = _archive(tmp_path / f"{name}.tar.gz", members)
        with pytest.raises(PortabilityError, match="at most|more than"):
            import_run(archive, runs_dir, require=("run.json",))
        assert not runs_dir.exists(), name


def test_run_id_with_terminal_escapes_is_refused_and_never_printed_raw(exchange_run, tmp_path: Path) -> None:
    home, run_dir = exchange_run
    evil = "run\x1b[31mRED\nline2"
    archive = _tar(run_dir, tmp_path / "evil.tar.gz", evil)
    out = ks("runs", "import", str(archive), "--home", home)
    line = _one_error_line(out)
    assert "\x1b" not in out.output and "\\x1b" in line
    # a folder made by hand with such a name is skipped by the listing, not printed
    shutil.copytree(run_dir, Path(home) / "runs" / evil)
    listed = ks("runs", "list", "--home", home, "--json")
    assert listed.exit_code == 0 and "\x1b" not in listed.output
    assert [r["id"] for r in json.loads(listed.output)] == [run_dir.name]


def test_one_broken_run_does_not_hide_the_others(exchange_run) -> None:
    """A run folder damaged by hand (or by an older import) is skipped with a warning by `runs list`, the
    GPU side's run finder and `runs resume --all`, instead of failing them for every run."""
    from kernelskill.pipeline.runs import gpu_side

    home, run_dir = exchange_run
    broken = run_dir.parent / "broken-run-1"
    shutil.copytree(run_dir, broken)
    with (broken / "events.jsonl").open("r+") as fh:
        lines = fh.read().splitlines()
        fh.seek(0)
        fh.write("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    listed = ks("runs", "list", "--home", home, "--json")
    assert listed.exit_code == 0 and [r["id"] for r in json.loads(listed.output)] == [run_dir.name]
    assert [r.path.name for r in gpu_side.find_runs(run_dir.parent)] == [run_dir.name]
    out = ks("runs", "resume", "--all", str(run_dir.parent), "--home", home, "--stop-before", "llm", *PLUGINS)
    assert out.exit_code in (0, 3) and "Traceback" not in out.output, out.output
