"""No KB write is lost: concurrent ``kb add`` runs both land; an add killed right before or right after
the DuckDB switch leaves the KB and its skill files agreeing (or ``kb doctor`` says so and repairs it);
a KB whose objects outlived their file (as an older version left it) is detected and written back.
Real processes, a real DuckDB file, real Chroma and the bundled embedding model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main

SMALL = Path(__file__).parent / "data" / "skills_small"
KILL = """
import os, sys
from kernelskill.kb import store
from kernelskill.cli import main
where = sys.argv.pop(1)
if where == "after_switch":   # the DuckDB switch happened; Chroma was never synced
    store.KBStore._sync_chroma = lambda self, h: os._exit(9)
else:                         # the files are placed; the new DuckDB file was never written
    store.KBStore._write_duckdb = lambda self, s, h: os._exit(9)
sys.argv[0] = "kernelskill"
main()
"""


def _ks(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.stdout


def _case(tmp_path: Path, n: int) -> Path:
    path = tmp_path / f"c{n}.yaml"
    path.write_text(f"cases:\n  - id: case.c{n}\n    title: t{n}\n    bottleneck: compute_throughput\n"
                    "    methods: [tensor_core_mma]\n    rationale: r\n")
    return path


def _cases(home: Path) -> set[str]:
    rows = json.loads(_ks("kb", "list", "--type", "case", "--home", str(home), "--json"))
    return {r["id"] for r in rows}


def _doctor(home: Path, *extra: str, code: int = 0) -> dict:
    result = CliRunner().invoke(main, ["kb", "doctor", "--home", str(home), "--json", *extra])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    _ks("kb", "init", "--home", str(h), "--skills", str(SMALL))
    return h


def test_concurrent_adds_all_land(home: Path, tmp_path: Path) -> None:
    files = [_case(tmp_path, n) for n in range(3)]
    procs = [subprocess.Popen([sys.executable, "-m", "kernelskill", "kb", "add", str(f), "--home", str(home)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for f in files]
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    assert {"case.c0", "case.c1", "case.c2"} <= _cases(home)
    assert _doctor(home)["in_sync"] is True
    assert {f.name for f in files} <= {p.name for p in (home / "skills").iterdir()}


def _killed_add(home: Path, where: str, file: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", KILL, where, "kb", "add", str(file), "--home", str(home)],
                          capture_output=True, timeout=300)
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]


def test_add_killed_after_the_switch_keeps_the_file(home: Path, tmp_path: Path) -> None:
    _killed_add(home, "after_switch", _case(tmp_path, 7))
    assert (home / "skills" / "c7.yaml").is_file()  # the file landed before the switch
    report = _doctor(home, code=1)
    assert report["pending_write"] is True and report["in_sync"] is False
    repaired = _doctor(home, "--repair")
    assert repaired["repaired"] is True
    assert _doctor(home)["in_sync"] is True
    _ks("kb", "init", "--home", str(home))  # a re-init keeps the object: its file is there
    assert "case.c7" in _cases(home)


def test_add_killed_before_the_switch_is_undone(home: Path, tmp_path: Path) -> None:
    _killed_add(home, "before_switch", _case(tmp_path, 8))
    assert _doctor(home, code=1)["unapplied"] == ["case.c8"]  # the file is there, the KB does not hold it
    _doctor(home, "--repair")
    assert not (home / "skills" / "c8.yaml").exists() and "case.c8" not in _cases(home)
    assert _doctor(home)["in_sync"] is True


def test_doctor_writes_back_objects_whose_file_is_gone(home: Path, tmp_path: Path) -> None:
    """The state an older version left after dying between its switch and its copy: the KB serves an
    object that no skill file holds, and a re-init would drop it."""
    from kernelskill.config import load_settings
    from kernelskill.kb.curate import compose
    from kernelskill.kb.store import KBStore

    settings = load_settings(home=home)
    skills, _ = compose(settings, extra=[_case(tmp_path, 9)])
    KBStore.open(settings.kb_dir, embed_settings=settings.embed).ingest(skills, check=False)
    report = _doctor(home, code=1)
    assert report["orphans"] == ["case.c9"] and report["in_sync"] is False
    repaired = _doctor(home, "--repair")
    recovered = Path(repaired["recovered_file"])
    assert recovered.parent == home / "skills" and "case.c9" in recovered.read_text()
    _ks("kb", "init", "--home", str(home))
    assert "case.c9" in _cases(home) and _doctor(home)["in_sync"] is True
