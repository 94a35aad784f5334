"""The suite's small parts: task selection, KernelBench's layout, the LLM gate, the GPU pool, the suite folder."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.bench.llm_gate import LLMGate
from kernelskill.pipeline.bench.suite import Suite
from kernelskill.pipeline.bench.tasks import kernelbench_tasks, parse_selection, solution_tasks
from kernelskill.pipeline.runs.gpu_pool import BudgetExceeded, GPUJob, GPUPool, LoopEvaluatorBackend
from tests.test_bench_helpers import task_source, write_level


def test_selection() -> None:
    assert parse_selection("1-3,7,2") == [1, 2, 3, 7]
    assert parse_selection(None) is None
    for bad in ("a", "5-2", "1,,2"):
        with pytest.raises(KernelskillError, match="--tasks"):
            parse_selection(bad)


def test_level_tied_ids_mix_levels_in_one_suite(tmp_path: Path) -> None:
    write_level(tmp_path, 1, ["Relu", "Gelu", "Tanh"])
    write_level(tmp_path, 2, ["Conv", "Gemm"])
    sel = parse_selection("1,3,L2/2")
    assert sel == [1, 3] and sel.by_level == {2: [2]}
    refs = kernelbench_tasks(tmp_path, [1], sel)  # untied ids apply to --level only, L2/2 adds level 2
    assert [r.name for r in refs] == ["L1/1_Relu", "L1/3_Tanh", "L2/2_Gemm"]
    refs = kernelbench_tasks(tmp_path, [], parse_selection("L1/2,2/1"))
    assert [r.name for r in refs] == ["L1/2_Gelu", "L2/1_Conv"]


def test_kernelbench_layout_from_the_checkout_or_its_kernelbench_folder(tmp_path: Path) -> None:
    write_level(tmp_path, 1, ["Relu", "Gelu"])
    (tmp_path / "KernelBench" / "level1" / "notes.py").write_text("not a problem file name")
    for root in (tmp_path, tmp_path / "KernelBench"):
        refs = kernelbench_tasks(root, [1], None)
        assert [(r.name, r.problem_id, r.error) for r in refs] == [("L1/1_Relu", 1, None), ("L1/2_Gelu", 2, None)]
    with pytest.raises(KernelskillError, match="no such folder"):
        kernelbench_tasks(tmp_path / "missing", [1])


def test_solutions_of_other_levels_are_not_read(tmp_path: Path) -> None:
    write_level(tmp_path, 2, ["Conv"])
    sols = tmp_path / "sols"
    sols.mkdir()
    (sols / "level_2_problem_1_sample_3_kernel.py").write_text("x = 1\n")
    (sols / "level_1_problem_1_sample_0_kernel.py").write_text("x = 1\n")
    [ref] = solution_tasks(sols, tmp_path, [2])
    assert (ref.name, ref.sample, ref.error) == ("L2/1_Conv/s3", 3, None)


def test_gate_bounds_requests_and_backs_off_on_rate_limits() -> None:
    gate = LLMGate(limit=2, raise_after=2, cooldown_s=0.0)
    peak, now = [0], [0]
    lock = threading.Lock()

    def request(_: int) -> None:
        gate.acquire()
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.01)
        with lock:
            now[0] -= 1
        gate.release(latency_s=0.01, rate_limited=False)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(request, range(24)))
    assert peak[0] <= 2 and gate.requests == 24
    gate.acquire()
    gate.release(latency_s=0.0, rate_limited=True, retry_after_s=0.0)
    assert gate.limit == 1 and gate.rate_limited == 1
    for _ in range(2):
        gate.acquire()
        gate.release(latency_s=0.0, rate_limited=False)
    assert gate.limit == 2  # raised again after clean answers, never above the configured limit
    for _ in range(4):
        gate.acquire()
        gate.release(latency_s=0.0, rate_limited=False)
    assert gate.limit == 2


def test_gate_refuses_what_would_end_after_the_deadline() -> None:
    gate = LLMGate(limit=1, deadline=time.monotonic() + 60)
    assert not gate.would_overrun()
    gate.acquire()
    gate.release(latency_s=3600.0, rate_limited=False)  # the slowest answer so far: an hour
    assert gate.would_overrun()


class Echo:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int | None]] = []

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        self.seen.append((candidate.name, seed))
        return {"status": "ok", "candidate": candidate.name}

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        raise RuntimeError("no ncu")


def test_pool_resolves_each_job_and_passes_errors_to_its_caller(tmp_path: Path) -> None:
    echo = Echo()
    with GPUPool(LoopEvaluatorBackend(echo, slots=3), build_jobs=2) as pool:
        futures = [pool.submit(GPUJob("eval", Path("t.py"), Path(f"c{i}.py"), tmp_path, seed=i)) for i in range(9)]
        broken = pool.submit(GPUJob("profile", Path("t.py"), Path("p.py"), tmp_path))
        assert [f.result()["candidate"] for f in futures] == [f"c{i}.py" for i in range(9)]
        with pytest.raises(RuntimeError, match="no ncu"):
            broken.result()
        stats = pool.stats
    assert stats.done == 10 and stats.slots == 3 and stats.running == 0
    assert sorted(echo.seen) == sorted((f"c{i}.py", i) for i in range(9))
    with GPUPool(LoopEvaluatorBackend(echo)) as pool, pytest.raises(ValueError, match="unknown GPU job kind"):
        pool.submit(GPUJob("build", Path("t"), Path("c"), tmp_path))


def test_pool_starts_nothing_past_its_deadline(tmp_path: Path) -> None:
    echo = Echo()
    with GPUPool(LoopEvaluatorBackend(echo), deadline=time.monotonic() + 30, estimates={"eval": 60.0}) as pool:
        future = pool.submit(GPUJob("eval", Path("t.py"), Path("c.py"), tmp_path))
        with pytest.raises(BudgetExceeded):
            future.result()
    assert echo.seen == [] and pool.stats.refused == 1


def test_a_run_folder_cut_off_before_its_manifest_is_made_again(tmp_path: Path) -> None:
    from kernelskill.pipeline.bench.tasks import file_tasks

    task = tmp_path / "t.py"
    task.write_text(task_source("t"))
    suite = Suite.create_or_resume(tmp_path / "s", "optimize", file_tasks([task]), {"protocol": "strict"})
    [entry] = suite.tasks
    cut = suite.runs_dir / entry["run_id"]
    cut.mkdir(parents=True)
    (cut / "run.json").write_text('{"id": ')  # killed while writing it
    run = suite.run_for(entry, {"model": "m"})
    assert run.manifest["model"] == "m" and (run.path / "task.py").read_text() == task.read_text()
    assert suite.run_for(entry, {"model": "other"}).manifest["model"] == "m"  # the existing run is kept
    with pytest.raises(KernelskillError, match="other tasks"):
        Suite.create_or_resume(tmp_path / "s", "optimize", file_tasks([task, task]), {})


def test_compare_puts_two_arms_side_by_side() -> None:
    from kernelskill.pipeline.bench.compare import compare, markdown

    def row(task: str, speedup: float | None, compile_: float | None = None, rnd: int | None = 1) -> dict:
        return {"task": task, "level": 1, "status": "finished", "correct": speedup is not None, "speedup": speedup,
                "speedup_compile": compile_, "best_round": rnd if speedup else None, "verified": True,
                "failure": None if speedup else "mismatch", "evals": 4, "tokens": 0, "llm_calls": 7,
                "answer_chars": 100, "gpu_s": 1.0}

    a = {"suite": "kb", "tasks": [row("L1/a", 2.0, 1.0), row("L1/b", 1.01, 0.5), row("L1/c", None),
                                  row("L1/d", 1.5, 1.2)]}
    b = {"suite": "none", "tasks": [row("L1/a", 1.0, 0.5), row("L1/b", 1.0, 0.5), row("L1/c", 1.2, 0.9)]}
    c = compare(a, b)
    winners = {t["task"]: t["winner"] for t in c["tasks"]}
    assert winners == {"L1/a": "a", "L1/b": "tie", "L1/c": "b", "L1/d": None}
    assert c["wins"] == {"a": 1, "b": 1, "tie": 1} and c["common_correct"] == 2
    assert c["geomean"]["a"] == pytest.approx((2.0 * 1.01) ** 0.5) and c["geomean"]["b"] == pytest.approx(1.0)
    text = markdown(c)
    assert "| L1/d | yes | 1.500x | 1.200x | 1 | not run |" in text
    assert "A better on 1 task(s), B better on 1, tie on 1" in text
    # spend is summed over the tasks both arms ran (L1/d is A's alone)
    assert c["llm_calls"] == {"a": 21, "b": 21} and c["gpu_s"] == {"a": 3.0, "b": 3.0}


def test_cli_takes_level_tied_ids_alone_but_not_untied_ids_without_a_level(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kernelskill.cli import main

    write_level(tmp_path, 1, ["Relu", "Gelu"])
    write_level(tmp_path, 2, ["Conv"])
    base = ["bench", "run", "--kernelbench", str(tmp_path), "--llm", "exchange", "--stop-before", "gpu",
            "--rounds", "0", "--home", str(tmp_path / "home"), "--no-progress", "--json"]
    for bad in (["--tasks", "1"], []):
        out = CliRunner().invoke(main, [*base, *bad, "--suite", str(tmp_path / "bad")])
        assert out.exit_code == 2 and "needs --level N" in out.output, out.output
    out = CliRunner().invoke(main, [*base, "--tasks", "L1/2,L2/1", "--suite", str(tmp_path / "ok")])
    assert out.exit_code == 3, out.output  # both runs wait for their seed's answer
    assert sorted(p.name for p in (tmp_path / "ok" / "runs").iterdir()) == ["001-L1_2_Gelu", "002-L2_1_Conv"]


def test_a_report_as_it_stood_after_a_round_leaves_out_what_was_measured_after_it(tmp_path: Path) -> None:
    """A re-verification has no round: after the last round it re-measures that round's candidates, so the
    line of an earlier round must count neither its GPU seconds nor its verdict."""
    from kernelskill.pipeline.bench.report import task_row
    from kernelskill.pipeline.runs.store import RunStore

    task = tmp_path / "t.py"
    task.write_text(task_source("relu"))
    run = RunStore(tmp_path / "runs").create(task, {"protocol": "kernelbench"}, run_id="001-t")

    def evaluated(step: str, round_: int | None, speedup: float, worker_s: float) -> None:
        result = {"status": "ok", "correct": True, "speedup": speedup, "candidate_ms": 1.0 / speedup,
                  "baseline_ms": 1.0, "details": {"worker_seconds": worker_s}}
        run.log.append("gpu", "eval", {"candidate": f"candidates/{step}.py", "result": result},
                       step=step if step.startswith("verify.") else step.replace("optimize", "eval"), round_=round_)

    evaluated("r00.generate", 0, 1.0, 5.0)
    evaluated("r01.optimize", 1, 1.5, 7.0)
    evaluated("r02.optimize", 2, 2.0, 11.0)
    evaluated("verify.r02.optimize", None, 1.9, 13.0)
    entry = {"name": "t", "run_id": run.id}
    after_one = task_row(entry, run, upto_round=1)
    assert after_one["gpu_s"] == 12.0 and after_one["speedup"] == 1.5 and not after_one["verified"]
    whole = task_row(entry, run)
    assert whole["gpu_s"] == 36.0 and whole["speedup"] == 2.0
