"""Archives carry runs, never damage (issue 27, failure 8): ``bench import`` of a bundle is all or nothing (a
bad third archive imports none: exit 2, one line); an event log over its caps (a 250 KB archive unpacking to
100 MiB of valid events, or more lines than a run holds) is refused at once; a gzip stream is checked to its
end (a zeroed CRC is refused); ``runs list`` stays quick beside a huge run (its log is never read).

Real components: a real suite made by ``bench run`` (the LLM over HTTP to the local test server, the GPU a
scripted evaluator), real archives and bundles written with ``tarfile``/``export_run``, the real CLI."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from kernelskill.pipeline.runs.bounds import MAX_EVENT_LOG_BYTES, MAX_EVENT_LOG_LINES
from kernelskill.pipeline.runs.portable import ARCHIVE_SUFFIX, export_run
from tests.openai_test_server import ScriptedOpenAI
from tests.test_bench_helpers import responder, task_source
from tests.test_bench_suite import PLUGINS, env_for, ks

EVENT = {"seq": 999, "ts": "2026-12-07T00:00:00.000000Z", "kind": "loop", "type": "note", "step": None,
         "round": None, "data": {"note": "carried"}}


def _one_error_line(out: Any) -> str:
    assert out.exit_code == 2, out.output
    lines = [ln for ln in out.output.strip().splitlines() if not ln.startswith("WARNING")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.output, out.output
    return lines[0]


def _snapshot(runs_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(runs_dir).as_posix(): p.read_bytes() for p in sorted(runs_dir.rglob("*")) if p.is_file()
            and p.name != ".lock"}


@pytest.fixture(scope="module")
def suite_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished three-task suite (made once; each test works on a copy)."""
    root = tmp_path_factory.mktemp("suite")
    tasks = []
    for name in ("a", "b", "c"):
        (root / f"{name}.py").write_text(task_source(name))
        tasks.append(str(root / f"{name}.py"))
    with ScriptedOpenAI(responder=responder) as server:
        out = ks("bench", "run", *tasks, "--rounds", "0", "--home", str(root / "home"), "--base-url",
                 server.base_url, *PLUGINS, "--suite", str(root / "suite"), env=env_for(root))
    assert out.exit_code == 0, out.output
    return root


@pytest.fixture
def suite(suite_src: Path, tmp_path: Path) -> Path:
    shutil.copytree(suite_src / "suite", tmp_path / "suite")
    return tmp_path / "suite"


def _runs(suite: Path) -> list[Path]:
    return sorted(p for p in (suite / "runs").iterdir() if (p / "run.json").is_file())


def _carried(run: Path, into: Path, damage: str | None = None) -> Path:
    """The run as it comes back from the GPU side: its log extended by one event, exported; ``damage``:
    ``bad_line`` (a line that is not JSON in the middle of its log) or ``zero_crc`` (the gzip trailer's CRC
    zeroed)."""
    copy = into / "copies" / run.name
    shutil.copytree(run, copy)
    with (copy / "events.jsonl").open("a") as fh:
        fh.write(json.dumps(EVENT) + "\n")
    if damage == "bad_line":
        lines = (copy / "events.jsonl").read_text().splitlines()
        (copy / "events.jsonl").write_text("\n".join([lines[0], '{"type": "cut', *lines[1:]]) + "\n")
    archive = export_run(copy, into / f"{run.name}{ARCHIVE_SUFFIX}")
    if damage == "zero_crc":
        data = bytearray(archive.read_bytes())
        data[-8:-4] = b"\0\0\0\0"
        archive.write_bytes(bytes(data))
    return archive


def _bundle(path: Path, archives: list[Path], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tar:
        for archive in archives:
            tar.add(archive, arcname=archive.name, recursive=False)
    return path


@pytest.mark.parametrize("damage", ["bad_line", "zero_crc"])
def test_bench_import_with_a_bad_third_archive_imports_nothing(suite: Path, tmp_path: Path, damage: str) -> None:
    runs = _runs(suite)
    assert len(runs) == 3
    before = _snapshot(suite / "runs")
    carry = tmp_path / "carry"
    carry.mkdir()
    archives = [_carried(runs[0], carry), _carried(runs[1], carry), _carried(runs[2], carry, damage)]
    line = _one_error_line(ks("bench", "import", str(suite), str(_bundle(tmp_path / "back.tar", archives))))
    assert runs[2].name in line and ("events.jsonl:2" in line if damage == "bad_line" else "CRC" in line), line
    assert _snapshot(suite / "runs") == before  # the first two were not taken either; no staging left
    # the same bundle without the bad archive comes in whole
    good = _bundle(tmp_path / "good.tar", [*archives[:2], _carried(runs[2], tmp_path / "again")])
    out = ks("bench", "import", str(suite), str(good), "--json")
    assert out.exit_code == 0, out.output
    assert all((r / "events.jsonl").read_text().endswith(json.dumps(EVENT) + "\n") for r in runs)


def test_a_bundle_compressed_whole_with_a_zeroed_crc_is_refused(suite: Path, tmp_path: Path) -> None:
    runs = _runs(suite)
    before = _snapshot(suite / "runs")
    bundle = _bundle(tmp_path / "back.tar.gz", [_carried(r, tmp_path) for r in runs], mode="w:gz")
    data = bytearray(bundle.read_bytes())
    data[-8:-4] = b"\0\0\0\0"
    bundle.write_bytes(bytes(data))
    line = _one_error_line(ks("bench", "import", str(suite), str(bundle)))
    assert "CRC" in line, line
    assert _snapshot(suite / "runs") == before


class _Repeat(io.RawIOBase):
    """``size`` bytes of ``line`` repeated, read in chunks (never held whole)."""

    def __init__(self, line: bytes, size: int) -> None:
        self.line, self.left, self.at = line, size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.left)
        period = len(self.line)
        chunk = (self.line * (n // period + 2))[self.at:self.at + n]
        buffer[:n] = chunk
        self.left -= n
        self.at = (self.at + n) % period
        return n


def _events_archive(path: Path, top: str, run_json: bytes, events_size: int, line: bytes) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, size, data in ((f"{top}/run.json", len(run_json), io.BytesIO(run_json)),
                                 (f"{top}/task.py", 4, io.BytesIO(b"x=1\n")),
                                 (f"{top}/events.jsonl", events_size, io.BufferedReader(_Repeat(line, events_size)))):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, data)
    return path


def test_an_event_log_over_its_caps_is_refused(suite: Path, tmp_path: Path) -> None:
    run = _runs(suite)[0]
    run_json = (run / "run.json").read_bytes()
    home = tmp_path / "home"
    event = (json.dumps(EVENT) + "\n").encode()
    bomb = _events_archive(tmp_path / "bomb.tar.gz", "bomb-run-1", run_json, 100 * 2**20, event)
    assert bomb.stat().st_size < 512 * 1024  # a small archive...
    line = _one_error_line(ks("runs", "import", str(bomb), "--home", str(home)))
    assert f"{100 * 2**20:,} bytes" in line and f"at most {MAX_EVENT_LOG_BYTES:,}" in line, line
    small = (json.dumps({"type": "n", "data": {}}) + "\n").encode()  # ...or a log of more lines than a run holds
    many = _events_archive(tmp_path / "many.tar.gz", "many-run-1", run_json, (MAX_EVENT_LOG_LINES + 10) * len(small),
                           small)
    line = _one_error_line(ks("runs", "import", str(many), "--home", str(home)))
    assert f"more than {MAX_EVENT_LOG_LINES:,} lines" in line, line
    assert not (home / "runs").exists()  # nothing imported, not even the runs folder


def test_runs_list_never_reads_a_huge_log(suite: Path, tmp_path: Path) -> None:
    """A run folder placed by hand with 100 MiB of valid events, another with a 3 GB manifest: `runs list`
    skips them with a warning (their size is looked at, they are not read); `runs show` says why in one line."""
    runs_dir = suite / "runs"
    good = _runs(suite)
    huge = runs_dir / "huge-run-1"
    shutil.copytree(good[0], huge)
    event = (json.dumps(EVENT) + "\n").encode()
    with (huge / "events.jsonl").open("wb") as fh:
        for _ in range(100):
            fh.write(event * (2**20 // len(event)))
    big_manifest = runs_dir / "big-manifest-1"  # and one whose run.json is 3 GB long (sparse: never read)
    shutil.copytree(good[0], big_manifest)
    with (big_manifest / "run.json").open("r+b") as fh:
        fh.truncate(3 * 2**30)
    out = ks("runs", "list", "--home", str(suite), "--json")  # the suite's runs folder is <suite>/runs
    assert out.exit_code == 0, out.output
    listed = json.loads(out.output[out.output.index("["):])
    assert sorted(r["id"] for r in listed) == [r.name for r in good]
    line = _one_error_line(ks("runs", "show", huge.name, "--home", str(suite)))
    assert "events.jsonl" in line and "more than a run's event log may hold" in line, line


def test_runs_import_of_several_archives_is_all_or_nothing(suite: Path, tmp_path: Path) -> None:
    runs = _runs(suite)
    good, bad = _carried(runs[0], tmp_path), _carried(runs[1], tmp_path, "zero_crc")
    home = tmp_path / "elsewhere"
    line = _one_error_line(ks("runs", "import", str(good), str(bad), "--home", str(home)))
    assert bad.name in line and "CRC" in line, line
    assert not (home / "runs").exists()  # the good one was not taken either
    out = ks("runs", "import", str(good), str(_carried(runs[1], tmp_path / "fixed")), "--home", str(home), "--json")
    assert out.exit_code == 0, out.output
    assert sorted(p.name for p in (home / "runs").iterdir()) == sorted(r.name for r in runs[:2])
