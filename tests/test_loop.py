"""The closed loop on CPU: the real openai client over HTTP to the local test server (the LLM's answers),
a scripted evaluator at the GPU boundary, and every branch of the loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kernelskill.config import LLMSettings
from kernelskill.pipeline.loop import Loop, LoopOptions
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import RunStore, sql
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import (
    ADD_CANDIDATE,
    ADD_TASK,
    TASK,
    ScriptedEvaluator,
    fenced,
    kernel,
    main_script,
    planner_answer,
    retriever,
    review,
)

FAULTED = {"r02.plan.1": 2, "r02.optimize.1": 2, "r05.optimize.1": 2}


def llm_settings(url: str) -> LLMSettings:
    return LLMSettings(base_url=url, model="test-model", api_key="sk-test", timeout_s=0.6, max_retries=2,
                       backoff_s=0.01)


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "relu2.py"
    path.write_text(TASK)
    return path


def make_loop(tmp_path: Path, task_file: Path, url: str, run_id: str | None = None, **opts):
    store = RunStore(tmp_path / "runs")
    options = LoopOptions(rounds=5, **opts)
    run = store.open(run_id) if run_id else store.create(task_file, {"model": "test-model",
                                                                      "options": options.model_dump()})
    evaluator = ScriptedEvaluator()
    loop = Loop(run, LLMClient.from_settings(llm_settings(url)), evaluator, retriever(), options)
    return loop, evaluator


def test_loop_takes_every_branch(tmp_path: Path, task_file: Path) -> None:
    with ScriptedOpenAI(main_script()) as server:
        loop, evaluator = make_loop(tmp_path, task_file, server.base_url)
        progress: list[dict] = []
        loop.on_progress = progress.append
        result = loop.execute()

        # every LLM step asked exactly once, faulted ones retried once (429, 500, timeout)
        counts = Counter(server.steps())
        assert {s: c for s, c in counts.items() if c != 1} == FAULTED
        assert set(counts) == set(main_script())

    run = loop.run
    assert result.status == "finished" and result.verified
    assert result.best["candidate"] == "candidates/r05.optimize.py"
    assert result.best["speedup"] == pytest.approx(2.40)
    assert result.best["verified_speedup"] == pytest.approx(2.40)

    attempts = [(a.round, a.branch, a.method, a.result_class, a.speedup, a.accepted) for a in loop.memory.attempts]
    assert attempts == [
        (0, "generate", None, "compile_error", None, False),
        (1, "repair", None, "ok", 1.10, True),
        (2, "optimize", "vectorized_access_16b", "ok", 1.90, True),
        (3, "optimize", "coalesced_access", "mismatch", None, False),
        (4, "repair", "coalesced_access", "ok", 1.50, False),
        (5, "optimize", "kernel_fusion", "ok", 2.40, True),
    ]
    # the repair saw the diagnosis; the memory is in later prompts
    assert loop.memory.repairs[0].diagnosis == "blockIdx_x is not a CUDA builtin"
    assert loop.memory.repairs[0].outcome == "ok"

    plans = {e["step"]: e["data"] for e in run.log.of_type("plan")}
    assert plans["r02.plan"]["asks"] == 2 and not plans["r02.plan"]["fallback"]
    assert "tensor_core_mma" in plans["r02.plan"]["rejections"][0]
    assert plans["r03.plan"]["fallback"] and plans["r03.plan"]["method"] == "coalesced_access"
    assert plans["r05.plan"]["filtered"] == {"coalesced_access": "round 4: measured 1.500x <= parent 1.900x"}
    assert "coalesced_access" not in plans["r05.plan"]["offered"]
    prompt_r05 = next(e for e in run.log.of_type("llm_call") if e["step"] == "r05.plan.1")["data"]["messages"][-1]
    assert "Not offered again" in prompt_r05["content"] and "round 3 optimize `coalesced_access`" in prompt_r05["content"]
    reask = next(e for e in run.log.of_type("llm_call") if e["step"] == "r02.plan.2")["data"]["messages"][-1]
    assert "is not in the permitted list" in reask["content"]

    # GPU side: each candidate evaluated once, each parent profiled once, the best re-verified on a fresh seed
    assert Counter(k for k, _ in evaluator.calls) == {"evaluate": 7, "profile": 2}
    verify = [e for e in run.log.of_type("eval") if e["step"].startswith("verify.")]
    assert len(verify) == 1 and verify[0]["data"]["seed"] == LoopOptions().verify_seed

    # outputs: KernelBench-compatible best.py, trajectory, report; the live display saw every phase
    best = (run.path / "best.py").read_text()
    assert "class ModelNew" in best and "speedup=2.40" in best
    assert len(json.loads((run.path / "trajectory.json").read_text())) == 6
    report = (run.path / "report.md").read_text()
    assert "| 5 | optimize | kernel_fusion |" in report and "fallback to top permitted" in report
    assert {p["phase"] for p in progress} >= {"generate", "diagnose", "repair", "profile", "query", "plan",
                                              "optimize", "evaluate", "review", "verify", "done"}
    assert progress[-1]["best_speedup"] == pytest.approx(2.40) and progress[-1]["tokens"] > 0

    # the log is the analysis database
    names, rows = sql(run, "select step, speedup from evals where status = 'ok' order by speedup desc limit 1")
    assert rows[0] == ("verify.r05.optimize", 2.4) or rows[0][1] == 2.4
    _, rows = sql(run, "select count(*), sum(prompt_tokens) > 0 from llm_calls")
    assert rows[0][0] == len(main_script()) and rows[0][1]
    assert not [line for line in (run.path / "events.jsonl").read_text().splitlines() if str(tmp_path) in line]


def test_the_query_gets_the_runs_own_protocol(tmp_path: Path, task_file: Path) -> None:
    """The vetoes follow the protocol the run is judged by (its manifest), not this machine's default: a
    kernelbench suite planned on a machine whose settings say strict was told libraries were forbidden."""
    store = RunStore(tmp_path / "runs")
    options = LoopOptions(rounds=5)
    run = store.create(task_file, {"model": "test-model", "options": options.model_dump(),
                                   "harness": {"protocol": "kernelbench"}})
    stand_in = retriever()
    with ScriptedOpenAI(main_script()) as server:
        Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), ScriptedEvaluator(), stand_in,
             options).execute()
    assert stand_in.protocols and set(stand_in.protocols) == {"kernelbench"}


def test_the_query_gets_the_runs_own_precision(tmp_path: Path, task_file: Path) -> None:
    """The precision a run evaluates in (its manifest's harness.precision) reaches every query, so the KB's
    precision vetoes follow the run, not the settings of the machine that resumes it."""
    store = RunStore(tmp_path / "runs")
    options = LoopOptions(rounds=5)
    run = store.create(task_file, {"model": "test-model", "options": options.model_dump(),
                                   "harness": {"protocol": "strict", "precision": "bf16"}})
    assert run.precision == "bf16"
    stand_in = retriever()
    with ScriptedOpenAI(main_script()) as server:
        Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), ScriptedEvaluator(), stand_in,
             options).execute()
    assert stand_in.precisions and set(stand_in.precisions) == {"bf16"}


def test_resume_of_a_finished_run_repeats_nothing(tmp_path: Path, task_file: Path) -> None:
    with ScriptedOpenAI(main_script()) as server:
        loop, _ = make_loop(tmp_path, task_file, server.base_url)
        first = loop.execute()
        before = len(server.requests)
        events = len(loop.run.log.events)
        again, evaluator = make_loop(tmp_path, task_file, server.base_url, run_id=loop.run.id)
        second = again.execute()
        assert len(server.requests) == before
    assert evaluator.calls == []
    assert second.best == first.best
    assert len(again.run.log.events) == events  # nothing re-recorded


class FailsReverificationOf(ScriptedEvaluator):
    """The stand-in harness, except that the candidate tagged ``tag`` is wrong on the fresh verification seed."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict:
        if seed == LoopOptions().verify_seed and f"# {self.tag}" in candidate.read_text():
            self._record("evaluate", candidate)
            return {"status": "mismatch", "correct": False, "message": "scripted: wrong on a fresh seed",
                    "build_log": ""}
        return super().evaluate(task, candidate, seed=seed)


def test_a_run_resumed_with_more_rounds_does_not_build_on_a_candidate_that_failed_reverification(
        tmp_path: Path, task_file: Path) -> None:
    script = main_script(timeout_fault=False) | {
        "r06.plan.1": [planner_answer(0, "one pass, fewer instructions")],
        "r06.optimize.1": [fenced(kernel("speedup=2.10", "more"))],
        "r06.review.1": [review(True)],
    }
    with ScriptedOpenAI(script) as server:
        store = RunStore(tmp_path / "runs")
        client = LLMClient.from_settings(llm_settings(server.base_url))
        run = store.create(task_file, {"model": "test-model", "options": LoopOptions(rounds=5).model_dump()})
        first = Loop(run, client, FailsReverificationOf("fused"), retriever(), LoopOptions(rounds=5)).execute()
        # the fastest (r05, 2.40x) failed its re-verification; the run returned r02 (1.90x)
        assert first.best["candidate"] == "candidates/r02.optimize.py"
        again = Loop(store.open(run.id), client, FailsReverificationOf("fused"), retriever(), LoopOptions(rounds=6))
        second = again.execute()
    plan = again.run.log.find("r06.plan", "plan")
    assert plan is not None and plan["data"]["parent"] == "candidates/r02.optimize.py"
    attempt = next(a for a in again.memory.attempts if a.round == 6)
    assert attempt.parent == "candidates/r02.optimize.py" and attempt.accepted
    assert second.best["candidate"] == "candidates/r06.optimize.py"


def test_stop_before_gpu_and_llm(tmp_path: Path, task_file: Path) -> None:
    with ScriptedOpenAI(main_script()) as server:
        loop, evaluator = make_loop(tmp_path, task_file, server.base_url, stop_before=["gpu"])
        paused = loop.execute()
        assert paused.status == "paused" and paused.paused_before == "gpu:r00.eval"
        assert evaluator.calls == [] and server.steps() == ["r00.generate.1"]
        # the GPU side evaluates and stops before the next LLM step
        gpu_side, evaluator = make_loop(tmp_path, task_file, server.base_url, run_id=loop.run.id,
                                        stop_before=["llm"])
        paused = gpu_side.execute()
        assert paused.paused_before == "llm:r01.diagnose.1"
        assert evaluator.calls == [("evaluate", "r00.generate.py")]
        assert server.steps() == ["r00.generate.1"]
        assert [e["type"] for e in gpu_side.run.log.events].count("run_paused") == 2
    from kernelskill.pipeline.runs import summary

    s = summary(gpu_side.run)
    assert s["status"] == "paused" and s["waits_for"] == "llm r01.diagnose.1"


def test_split_run_moves_between_folders(tmp_path: Path, task_file: Path) -> None:
    """LLM side here, GPU side in another folder that only has the run folder and stdlib code."""
    import shutil

    from kernelskill.pipeline.runs import Run, pending_request, run_gpu_step
    from kernelskill.pipeline.runs.portable import check_portable

    with ScriptedOpenAI(main_script()) as server:
        loop, _ = make_loop(tmp_path, task_file, server.base_url, stop_before=["gpu"])
        result = loop.execute()
        rounds_to_gpu = 0
        while result.status == "paused":
            assert check_portable(loop.run.path) == []
            pending = pending_request(loop.run)
            assert pending["side"] == "gpu" and pending["request"]["candidate"].startswith("candidates/")
            gpu_dir = tmp_path / "gpu-box" / loop.run.id
            shutil.rmtree(gpu_dir, ignore_errors=True)
            shutil.copytree(loop.run.path, gpu_dir)
            run_gpu_step(Run(gpu_dir), pending["request"], ScriptedEvaluator())
            shutil.rmtree(loop.run.path)
            shutil.copytree(gpu_dir, loop.run.path)  # carried back
            rounds_to_gpu += 1
            loop, _ = make_loop(tmp_path, task_file, server.base_url, run_id=loop.run.id, stop_before=["gpu"])
            result = loop.execute()
        counts = Counter(server.steps())
    assert result.status == "finished" and result.best["speedup"] == pytest.approx(2.40)
    assert rounds_to_gpu == 9  # 6 evaluations, 2 profiles, 1 re-verification
    assert {s: c for s, c in counts.items() if c != 1} == FAULTED


def test_optimize_cli_with_live_display_then_runs_commands(tmp_path: Path, task_file: Path) -> None:
    from click.testing import CliRunner

    from kernelskill.cli import main

    helpers = Path(__file__).with_name("test_loop_helpers.py")
    home = tmp_path / "home"
    env = {"OPENAI_API_KEY": "sk-test", "KERNELSKILL_LLM_TIMEOUT_S": "0.6", "KERNELSKILL_LLM_BACKOFF_S": "0.01",
           "KERNELSKILL_LLM_MODEL": "test-model"}
    with ScriptedOpenAI(main_script()) as server:
        result = CliRunner().invoke(main, [
            "optimize", str(task_file), "--rounds", "5", "--home", str(home), "--base-url", server.base_url,
            "--evaluator", f"{helpers}:ScriptedEvaluator", "--retriever", f"{helpers}:StandInRetriever"], env=env)
    assert result.exit_code == 0, result.output
    assert "best 2.400x over eager" in result.output and "best.py" in result.output
    run_id = next((home / "runs").iterdir()).name
    # without a terminal the live table is one line per phase on stderr
    assert f"optimize {run_id}: round 0/5 generate; best -" in result.stderr
    assert f"optimize {run_id}: round 5/5" in result.stderr and "best 2.400x" in result.stderr
    report = CliRunner().invoke(main, ["runs", "report", run_id, "--home", str(home)])
    assert "| 2 | optimize | vectorized_access_16b |" in report.output


WRONG = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a - b\n"
RIGHT = ADD_CANDIDATE


def test_loop_with_the_real_harness_on_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No stand-in at the GPU seam: the real harness (its CPU mode, pure-PyTorch candidates) measures."""
    # In a fresh interpreter: in a long session whose checkout is under /tmp, a harness worker started from
    # this process after earlier tests failed to import the package (known issue, see the closing note).
    if os.environ.get("KS_TEST_FRESH_PROCESS") != "1":
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               f"{__file__}::test_loop_with_the_real_harness_on_cpu"],
                              env={**os.environ, "KS_TEST_FRESH_PROCESS": "1"}, cwd=str(Path(__file__).parents[1]),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:]
        return
    from kernelskill.pipeline.loop import HarnessEvaluator, eval_view
    from tests.test_loop_helpers import DIAGNOSIS, fenced

    task = tmp_path / "add.py"
    task.write_text(ADD_TASK)
    options = LoopOptions(rounds=1)
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    script = {"r00.generate.1": [fenced(WRONG)], "r01.diagnose.1": [DIAGNOSIS], "r01.repair.1": [fenced(RIGHT)]}
    with ScriptedOpenAI(script) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), HarnessEvaluator(),
                      retriever(), options).execute()
    evals = {e["step"]: eval_view(e["data"]["result"]) for e in run.log.of_type("eval")}
    assert evals["r00.eval"]["status"] == "mismatch"
    assert evals["r01.eval"]["correct"] and evals["r01.eval"]["speedup"] > 0
    assert result.best["speedup"] == evals["r01.eval"]["speedup"]
    assert result.best["verified_speedup"] == evals["verify.r01.repair"]["speedup"]


def test_loop_with_the_real_query(tmp_path: Path, task_file: Path, monkeypatch) -> None:
    """The KB seam without a stand-in: kernelskill.query over a real store (DuckDB, Chroma, the bundled
    MiniLM), built from the small test skill set so that the test stays fast."""
    pytest.importorskip("kernelskill.retrieval.api")
    from kernelskill.config import load_settings
    from kernelskill.errors import KernelskillError
    from kernelskill.kb.home import open_store
    from kernelskill.pipeline.loop import KBRetriever
    from tests.test_loop_helpers import fenced, kernel, planner_answer, review

    monkeypatch.setenv("KERNELSKILL_HOME", str(tmp_path / "home"))
    settings = load_settings(home=tmp_path / "home")
    try:
        open_store(settings, bundled=Path(__file__).parent / "data" / "skills_small").close()
    except KernelskillError as exc:  # the KB room is still being written: not this test's subject
        pytest.skip(f"the test KB does not load: {str(exc)[:200]}")
    script = {"r00.generate.1": [fenced(kernel("speedup=1.20", "seed"))],
              "r01.plan.1": [planner_answer("not_a_method")], "r01.plan.2": [planner_answer(0)],
              "r01.optimize.1": [fenced(kernel("speedup=1.60", "opt"))], "r01.review.1": [review(True)]}
    options = LoopOptions(rounds=1)
    run = RunStore(tmp_path / "runs").create(task_file, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(script) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), ScriptedEvaluator(),
                      KBRetriever(settings), options).execute()
    query = run.log.find("query.r00.generate", "query")["data"]
    assert "error" not in query, query.get("error")
    permitted = [m["id"] for m in query["result"]["permitted"]]
    plan = run.log.find("r01.plan", "plan")["data"]
    assert permitted and plan["offered"] == permitted
    assert plan["asks"] == 2 and plan["method"] == permitted[0] and not plan["fallback"]
    assert result.best["speedup"] == pytest.approx(1.60)


def test_replay_reruns_a_recorded_trajectory_at_no_cost(tmp_path: Path, task_file: Path) -> None:
    with ScriptedOpenAI(main_script()) as server:
        recorded, _ = make_loop(tmp_path, task_file, server.base_url)
        first = recorded.execute()
    store = RunStore(tmp_path / "runs")
    run = store.create(task_file, {"model": "test-model"})
    replay = LLMClient.from_settings(LLMSettings(provider="replay", base_url=str(recorded.run.path)))
    again = Loop(run, replay, ScriptedEvaluator(), retriever(), LoopOptions(rounds=5)).execute()
    assert [a["method"] for a in again.trajectory] == [a["method"] for a in first.trajectory]
    assert again.best["speedup"] == first.best["speedup"] and again.cost_usd == 0.0
    assert {e["data"]["provider"] for e in run.log.of_type("llm_call")} == {"replay"}


class EvaluatesOnAnH100(ScriptedEvaluator):
    """Every result names the device that measured it, as the harness's ``details["gpu"]`` does."""

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        out = super().evaluate(task, candidate, seed=seed)
        out.setdefault("details", {})["gpu"] = {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "sm_count": 132,
                                                "l2_mb": 50, "memory_gb": 79.2, "copy_tb_s": 2.87}
        return out


def test_the_prompts_describe_the_gpu_that_evaluated_last(tmp_path: Path, task_file: Path) -> None:
    """Before any evaluation the prompts state the configured card; after one they state the device that measured
    it (its name and its measured copy bandwidth), and a resumed run replays the same descriptions."""
    store = RunStore(tmp_path / "runs")
    options = LoopOptions(rounds=5)
    run = store.create(task_file, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(main_script()) as server:
        Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), EvaluatesOnAnH100(), retriever(),
             options).execute()
    prompts = {e["step"]: e["data"]["messages"][-1]["content"] for e in run.log.of_type("llm_call")}
    assert "H200" in prompts["r00.generate.1"] and "H100" not in prompts["r00.generate.1"]
    later = prompts["r02.optimize.1"]
    assert "NVIDIA H100 80GB HBM3" in later and "H200" not in later
    assert "2.87 TB/s measured" in later and "50 MB L2" in later


class MeasuresIntervals(ScriptedEvaluator):
    """Every correct result carries the harness's 95 % interval of its speedup (here +-1 %)."""

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        out = super().evaluate(task, candidate, seed=seed)
        if out.get("speedup"):
            out["speedup_ci"] = [round(out["speedup"] * 0.99, 4), round(out["speedup"] * 1.01, 4)]
        return out


def test_every_speedup_a_report_shows_carries_its_interval(tmp_path: Path, task_file: Path) -> None:
    from kernelskill.pipeline.runs.report import candidate_rows, markdown_report, summary

    store = RunStore(tmp_path / "runs")
    options = LoopOptions(rounds=5)
    run = store.create(task_file, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(main_script()) as server:
        Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), MeasuresIntervals(), retriever(),
             options).execute()
    report = markdown_report(run)
    assert "| 5 | optimize | kernel_fusion |" in report and "2.4 (2.376-2.424)" in report
    assert "final pick: `candidates/r05.optimize.py`" in report and "(95 % interval 2.376-2.424x)" in report
    rows = {r["candidate"]: r for r in candidate_rows(run)}
    assert rows["candidates/r05.optimize.py"]["speedup_ci"] == "2.376-2.424"
    s = summary(run)
    assert s["verified_speedup"] == pytest.approx(2.4) and s["verified_speedup_ci"] == [2.376, 2.424]
    plan = next(e for e in run.log.of_type("llm_call") if e["step"] == "r05.plan.1")["data"]["messages"][-1]
    assert "1.900x over PyTorch eager, 95 % interval 1.881-1.919x)" in plan["content"]  # the parent, r02
