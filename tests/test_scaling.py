"""``benchmarks/scaling.py`` on suites that ``bench eval`` made here (the scripted evaluator at the GPU boundary,
one slot and two; one whose worker dies once): the table's numbers are the ones the suites recorded."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.pipeline.runs.gpu_pool import WorkerLost
from tests.test_bench_helpers import CountingEvaluator, write_level

HELPERS = Path(__file__).with_name("test_bench_helpers.py")
ROOT = Path(__file__).resolve().parents[1]
SPEEDUPS = [1.5, 2.0, 0.8, 1.2]


class DiesOnce(CountingEvaluator):
    """The scripted evaluator whose worker dies under the first job it is given (the pool runs it again)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock, self._died = threading.Lock(), False

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        with self._lock:
            dies, self._died = not self._died, True
        if dies:
            raise WorkerLost("scripted: the worker process vanished")
        return super().evaluate(task, candidate, seed=seed)


def make_suite(tmp_path: Path, name: str, evaluator: str, slots: int) -> Path:
    kb = tmp_path / "kb"
    if not kb.exists():
        write_level(kb, 1, ["Relu", "Gelu", "Add", "Mul"])
        sols = tmp_path / "sols"
        sols.mkdir()
        for i, speed in enumerate(SPEEDUPS, start=1):
            (sols / f"level_1_problem_{i}_sample_0_kernel.py").write_text(f"# harness: speedup={speed}\n")
    out = CliRunner().invoke(main, ["bench", "eval", str(tmp_path / "sols"), "--kernelbench", str(kb), "--level", "1",
                                    "--suite", str(tmp_path / name), "--home", str(tmp_path / "home"),
                                    "--evaluator", evaluator, "--gpu-slots", str(slots), "--no-progress", "--json"])
    assert out.exit_code == 0, out.output
    return tmp_path / name


def scaling(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling.py"), *args], capture_output=True,
                          text=True, timeout=60, check=False)


def recorded(suite: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    [session] = [json.loads(line) for line in (suite / "sessions.jsonl").read_text().splitlines()]
    details = [json.loads(line)["data"]["result"]["details"] for f in sorted(suite.glob("runs/*/events.jsonl"))
               for line in f.read_text().splitlines() if json.loads(line)["type"] == "eval"]
    return session, details


def test_the_scaling_table_is_what_the_suites_recorded(tmp_path: Path) -> None:
    one = make_suite(tmp_path, "one", f"{HELPERS}:CountingEvaluator", 1)
    two = make_suite(tmp_path, "two", f"{HELPERS}:CountingEvaluator", 2)
    dying = make_suite(tmp_path, "dying", f"{Path(__file__)}:DiesOnce", 2)
    out = scaling(str(one), str(two), str(dying), "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["suite"]: r for r in json.loads(out.stdout)["suites"]}
    for suite, slots, retries in ((one, 1, 0), (two, 2, 0), (dying, 2, 1)):
        session, details = recorded(suite)
        row = rows[suite.name]
        assert session["slots"] == slots == row["slots"] and session["retries"] == retries == row["retries"]
        assert row["evals"] == len(details) == len(SPEEDUPS) == row["jobs"] == session["gpu_jobs"]
        assert row["wall_s"] == round(session["elapsed_s"], 3) and row["lost"] == 0
        assert row["gpu_busy_share"] == round(min(1.0, session["gpu_busy_s"] / (session["gpu_span_s"] * slots)), 6)
        assert row["evals_per_gpu_hour"] == round(len(details) / (session["elapsed_s"] * slots / 3600), 3)
        assert row["evaluator"] == session["evaluator"] and row["evaluator"].endswith(("CountingEvaluator", "DiesOnce"))
        assert {d["evaluator"] for d in details} == {session["evaluator"]}
        assert row["devices_used"] == len({d["device"] for d in details}) <= slots
        assert sorted(d["attempts"] for d in details) == [1] * (len(SPEEDUPS) - retries) + [2] * retries
    text = scaling(str(one), str(two), str(dying))
    assert text.returncode == 0 and text.stdout.startswith("GPU scaling")
    lines = text.stdout.splitlines()
    assert "evals/GPU-h" in lines[1] and [line.split()[0] for line in lines[3:]] == ["one", "two", "dying"]
    bad = scaling(str(tmp_path / "kb"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "no suite.json" in bad.stderr
