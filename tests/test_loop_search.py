"""The search on CPU: K=3 candidates per round from a frontier of F=2, over 3 rounds, with the real openai
client against the local test server (the LLM's answers) and a scripted evaluator with ``evaluate_many`` at
the GPU boundary. A kill -9 in the middle of a batch, then a resume, repeats no request and no evaluation."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.config import LLMSettings
from kernelskill.pipeline.bench.report import markdown as suite_markdown
from kernelskill.pipeline.bench.report import suite_report
from kernelskill.pipeline.bench.suite import Suite
from kernelskill.pipeline.loop import Loop, LoopOptions
from kernelskill.pipeline.loop.agents import check_answer, json_expects
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.loop.planning import plans_schema
from kernelskill.pipeline.loop.search import spread
from kernelskill.pipeline.runs import RunStore
from kernelskill.pipeline.runs.exchange import Answer, Exchange
from kernelskill.pipeline.runs.gpu_side import evaluate_pending
from kernelskill.pipeline.runs.gpu_steps import pending_steps
from kernelskill.pipeline.runs.report import html_report, markdown_report, report_data
from tests.openai_test_server import ScriptedOpenAI
from tests.test_bench_helpers import responder, write_level
from tests.test_loop import llm_settings
from tests.test_loop_helpers import (
    DIAGNOSIS,
    TASK,
    ScriptedEvaluator,
    fenced,
    kernel,
    permitted_in,
    retriever,
    review,
)

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = {"rounds": 3, "candidates_per_round": 3, "frontier": 2, "repairs_per_candidate": 1}


class BatchEvaluator(ScriptedEvaluator):
    """The scripted GPU side with a batch entry point (as the harness's pool offers): results are handed
    back one by one as measured. ``KS_TEST_KILL_AT`` names a candidate file: right after its result is
    handed back, the process is killed (-9), in the middle of its batch."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def evaluate_many(self, steps: list[Any], *, on_result: Any = None, deadline: float | None = None) -> list[Any]:
        self.batches.append([Path(s.request["candidate"]).name for s in steps])
        out = []
        for i, s in enumerate(steps):
            result = self.evaluate(s.run.path / s.request["task"], s.run.path / s.request["candidate"],
                                   seed=s.request.get("seed"))
            out.append(result)
            if on_result is not None:
                on_result(i, result, None)
            if os.environ.get("KS_TEST_KILL_AT") == Path(s.request["candidate"]).name:
                os.kill(os.getpid(), signal.SIGKILL)
        return out


def plans(*items: tuple[str, str]) -> str:
    return json.dumps({"plans": [{"method": m, "rationale": "the diagnosis says so", "plan": p} for m, p in items]})


def search_script() -> dict[str, list[Any]]:
    """Round by round (parents in brackets):

    r00 seed 1.00x.
    r01 [seed x3]: coalesced -> compile error, repaired -> wrong result; vectorized 1.50x; fusion 1.20x.
        frontier: vectorized 1.50, fusion 1.20.
    r02 [vectorized x2]: fusion 2.00x (paid elsewhere: offered first), more_work 1.40x (slower than its parent:
        the measurements reject it, no reviewer asked); [fusion x1]: first answer names a forbidden method (re-asked),
        vectorized 1.30x. frontier: r02.k1 2.00, vectorized 1.50.
    r03 [r02.k1 x2]: coalesced 2.50x, more_work wrong -> repaired 2.20x; [vectorized x1]: more_work is
        filtered (it failed there in r02), coalesced 1.60x.
    """
    return {
        "r00.generate.1": [fenced(kernel("speedup=1.00", "seed"))],
        "r01.plan.p1.1": [plans(("coalesced_access", "coalesce"), ("vectorized_access_16b", "float4"),
                                ("kernel_fusion", "fuse"))],
        "r01.optimize.k1.1": [fenced(kernel("status=compile_error", "c1"))],
        "r01.optimize.k2.1": [fenced(kernel("speedup=1.50", "v1"))],
        "r01.optimize.k3.1": [fenced(kernel("speedup=1.20", "f1"))],
        "r01.review.k2.1": [review(True)],
        "r01.review.k3.1": [review(True)],
        "r01.diagnose1.k1.1": [DIAGNOSIS],
        "r01.repair1.k1.1": [fenced(kernel("status=mismatch", "c1fix"))],
        "r02.plan.p1.1": [plans(("kernel_fusion", "fuse the scale"), ("more_work_per_thread", "4 per thread"))],
        "r02.plan.p2.1": [plans(("tensor_core_mma", "mma"))],
        "r02.plan.p2.2": [plans(("vectorized_access_16b", "float4 on the fused kernel"))],
        "r02.optimize.k1.1": [fenced(kernel("speedup=2.00", "f2"))],
        "r02.optimize.k2.1": [fenced(kernel("speedup=1.40", "m2"))],
        "r02.optimize.k3.1": [fenced(kernel("speedup=1.30", "v2"))],
        "r02.review.k1.1": [review(True)],
        "r02.review.k3.1": [review(True)],
        "r03.plan.p1.1": [plans(("coalesced_access", "coalesce"), ("more_work_per_thread", "unroll"))],
        "r03.plan.p2.1": [plans(("coalesced_access", "coalesce the float4 loads"))],
        "r03.optimize.k1.1": [fenced(kernel("speedup=2.50", "c3"))],
        "r03.optimize.k2.1": [fenced(kernel("status=mismatch", "m3"))],
        "r03.optimize.k3.1": [fenced(kernel("speedup=1.60", "c3b"))],
        "r03.review.k1.1": [review(True)],
        "r03.review.k3.1": [review(True)],
        "r03.diagnose1.k2.1": [json.dumps({"error_class": "mismatch", "root_cause": "tail", "fix": "guard"})],
        "r03.repair1.k2.1": [fenced(kernel("speedup=2.20", "m3fix"))],
        "r03.review.repair1.k2.1": [review(True)],
    }


def make_loop(tmp_path: Path, url: str, run_id: str | None = None, **opts: Any) -> tuple[Loop, BatchEvaluator]:
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    store = RunStore(tmp_path / "runs")
    options = LoopOptions(**(OPTIONS | opts))
    run = store.open(run_id) if run_id else store.create(task, {"model": "test-model",
                                                                 "options": options.model_dump()})
    evaluator = BatchEvaluator()
    return Loop(run, LLMClient.from_settings(llm_settings(url)), evaluator, retriever(), options), evaluator


def test_spread_gives_the_best_member_the_extra_slot() -> None:
    assert spread(3, 2) == [2, 1] and spread(4, 2) == [2, 2] and spread(1, 2) == [1, 0]


def test_search_frontier_memory_and_batches(tmp_path: Path) -> None:
    with ScriptedOpenAI(search_script()) as server:
        loop, evaluator = make_loop(tmp_path, server.base_url)
        result = loop.execute()
        counts = Counter(server.steps())
    assert counts == Counter({step: 1 for step in search_script()})  # every step asked once, nothing else
    assert result.status == "finished" and result.verified
    assert result.best["candidate"] == "candidates/r03.optimize.k1.py"
    assert result.best["speedup"] == pytest.approx(2.5)

    # one batch per wave of each round, all of it at once
    assert evaluator.batches == [
        ["r01.optimize.k1.py", "r01.optimize.k2.py", "r01.optimize.k3.py"],
        ["r02.optimize.k1.py", "r02.optimize.k2.py", "r02.optimize.k3.py"],
        ["r03.optimize.k1.py", "r03.optimize.k2.py", "r03.optimize.k3.py"]]
    evaluated = Counter(name for kind, name in evaluator.calls if kind == "evaluate")
    assert {n: c for n, c in evaluated.items() if c > 1} == {"r03.optimize.k1.py": 2}  # + its re-verification
    assert len(evaluated) == 12  # the seed and 11 candidates of the rounds

    attempts = [(a.step, a.parent and Path(a.parent).stem, a.method, a.result_class, a.speedup, a.accepted)
                for a in loop.memory.attempts]
    assert attempts == [
        ("r00.generate", None, None, "ok", 1.0, True),
        ("r01.optimize.k1", "r00.generate", "coalesced_access", "compile_error", None, False),
        ("r01.optimize.k2", "r00.generate", "vectorized_access_16b", "ok", 1.5, True),
        ("r01.optimize.k3", "r00.generate", "kernel_fusion", "ok", 1.2, True),
        ("r01.repair1.k1", "r00.generate", "coalesced_access", "mismatch", None, False),
        ("r02.optimize.k1", "r01.optimize.k2", "kernel_fusion", "ok", 2.0, True),
        ("r02.optimize.k2", "r01.optimize.k2", "more_work_per_thread", "ok", 1.4, False),
        ("r02.optimize.k3", "r01.optimize.k3", "vectorized_access_16b", "ok", 1.3, True),
        ("r03.optimize.k1", "r02.optimize.k1", "coalesced_access", "ok", 2.5, True),
        ("r03.optimize.k2", "r02.optimize.k1", "more_work_per_thread", "mismatch", None, False),
        ("r03.optimize.k3", "r01.optimize.k2", "coalesced_access", "ok", 1.6, True),
        ("r03.repair1.k2", "r02.optimize.k1", "more_work_per_thread", "ok", 2.2, True),
    ]
    assert "1.400x <= parent 1.500x" in loop.memory.attempts[6].review  # the measurements' no, no reviewer asked

    log = loop.run.log
    plan = {e["step"]: e["data"] for e in log.of_type("plan")}
    # what paid on one frontier member is offered first to the other (not what is already in its lineage)
    assert plan["r02.plan.p1"]["paid_elsewhere"].keys() == {"kernel_fusion"}
    assert plan["r02.plan.p1"]["offered"][0] == "kernel_fusion" and plan["r02.plan.p1"]["wanted"] == 2
    assert plan["r02.plan.p2"]["paid_elsewhere"].keys() == {"vectorized_access_16b"}
    assert plan["r02.plan.p2"]["asks"] == 2 and "tensor_core_mma" in plan["r02.plan.p2"]["rejections"][0]
    # a method that failed on a member is not offered to it again; elsewhere it still is
    assert "more_work_per_thread" in plan["r03.plan.p2"]["filtered"]
    assert "more_work_per_thread" not in plan["r03.plan.p2"]["offered"]
    assert "more_work_per_thread" in plan["r03.plan.p1"]["offered"]
    assert "coalesced_access" in plan["r02.plan.p1"]["offered"]  # it failed on the seed, not on this member

    rounds = {e["data"]["round"]: e["data"] for e in log.of_type("round")}
    assert [rounds[r]["candidates"] for r in (1, 2, 3)] == [4, 3, 4]
    assert [rounds[r]["correct"] for r in (1, 2, 3)] == [2, 3, 3]
    assert [rounds[r]["best"] for r in (1, 2, 3)] == [1.5, 2.0, 2.5]
    assert rounds[2]["paid"] == ["kernel_fusion", "vectorized_access_16b"]
    assert [Path(f["candidate"]).stem for f in rounds[3]["frontier"]] == ["r03.optimize.k1", "r03.repair1.k2"]

    text = markdown_report(loop.run)
    assert "## Rounds" in text and "| 2 | 3 | 3 | 2.000 | kernel_fusion, vectorized_access_16b |" in text
    assert [r["round"] for r in report_data(loop.run)["rounds"]] == [0, 1, 2, 3]
    assert 'id="rounds"' in html_report(loop.run)

    # replayed into a new run: the same path, the same best, no request to the endpoint, no cost
    store = RunStore(tmp_path / "runs")
    again_run = store.create(tmp_path / "relu2.py", {"model": "test-model"})
    replay = LLMClient.from_settings(LLMSettings(provider="replay", base_url=str(loop.run.path)))
    again = Loop(again_run, replay, BatchEvaluator(), retriever(), LoopOptions(**OPTIONS)).execute()
    assert [a["step"] for a in again.trajectory] == [a["step"] for a in result.trajectory]
    assert again.best["speedup"] == result.best["speedup"] and again.cost_usd == 0.0
    assert {e["data"]["provider"] for e in again_run.log.of_type("llm_call")} == {"replay"}


def test_exchange_posts_every_prompt_of_a_round_at_once(tmp_path: Path) -> None:
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    store = RunStore(tmp_path / "runs")
    options = LoopOptions(**(OPTIONS | {"rounds": 1}))
    run = store.create(task, {"model": "m", "options": options.model_dump()})
    script = search_script()

    def resume() -> Any:
        llm = LLMClient.from_settings(LLMSettings(provider="exchange", model="m"))
        return Loop(store.open(run.id), llm, BatchEvaluator(), retriever(), options).execute()

    answered: list[list[str]] = []
    for _ in range(10):
        result = resume()
        if result.status == "finished":
            break
        waiting = [p["id"] for p in pending_steps(run) if p["side"] == "llm"]
        answered.append(waiting)
        for step in waiting:
            Exchange(run.path).put_answer(Answer(id=step, text=script[step][0], answered_by="test"))
    assert result.status == "finished"
    assert ["r01.optimize.k1.1", "r01.optimize.k2.1", "r01.optimize.k3.1"] in answered
    assert ["r01.review.k2.1", "r01.review.k3.1"] in answered


def child() -> None:  # pragma: no cover - runs in the subprocess that is killed
    loop, _ = make_loop(Path(os.environ["KS_TEST_TMP"]), os.environ["KS_TEST_URL"])
    loop.execute()


def test_kill_mid_batch_then_resume_repeats_nothing(tmp_path: Path) -> None:
    eval_log = tmp_path / "evals.jsonl"
    with ScriptedOpenAI(search_script()) as server:
        env = {**os.environ, "KS_TEST_TMP": str(tmp_path), "KS_TEST_URL": server.base_url,
               "KS_TEST_EVAL_LOG": str(eval_log), "KS_TEST_KILL_AT": "r02.optimize.k1.py"}
        proc = subprocess.run([sys.executable, "-c", "from tests.test_loop_search import child; child()"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
        killed = [json.loads(line)["candidate"] for line in eval_log.read_text().splitlines()]
        assert killed[-1] == "r02.optimize.k1.py" and "r02.optimize.k2.py" not in killed

        run_id = RunStore(tmp_path / "runs").list()[0].id
        os.environ["KS_TEST_EVAL_LOG"] = str(eval_log)
        try:
            loop, evaluator = make_loop(tmp_path, server.base_url, run_id=run_id)
            result = loop.execute()
        finally:
            del os.environ["KS_TEST_EVAL_LOG"]
        counts = Counter(server.steps())
    assert result.status == "finished" and result.best["candidate"] == "candidates/r03.optimize.k1.py"
    assert counts == Counter({step: 1 for step in search_script()})  # no LLM request repeated
    # the resumed batch holds only what was not measured before the kill
    assert evaluator.batches[0] == ["r02.optimize.k2.py", "r02.optimize.k3.py"]
    runs = Counter(json.dumps(line, sort_keys=True) for line in
                   (json.loads(x) for x in eval_log.read_text().splitlines()))
    repeated = {k: c for k, c in runs.items() if c > 1}
    assert repeated == {json.dumps({"candidate": "r03.optimize.k1.py", "kind": "evaluate"}, sort_keys=True): 2}


def test_split_run_pauses_with_the_whole_batch_and_the_gpu_side_evaluates_it_together(tmp_path: Path) -> None:
    gpu = BatchEvaluator()
    with ScriptedOpenAI(search_script()) as server:
        loop, _ = make_loop(tmp_path, server.base_url, rounds=1, stop_before=["gpu"])
        run_id = loop.run.id
        waits: list[list[str]] = []
        for _ in range(12):
            loop, _ = make_loop(tmp_path, server.base_url, run_id=run_id, rounds=1, stop_before=["gpu"])
            result = loop.execute()
            if result.status == "finished":
                break
            waits.append([p["id"] for p in pending_steps(loop.run)])
            evaluate_pending([loop.run], gpu)
        counts = Counter(server.steps())
    assert result.status == "finished" and result.best["candidate"] == "candidates/r01.optimize.k2.py"
    assert ["r01.eval.k1", "r01.eval.k2", "r01.eval.k3"] in waits  # `runs pending` lists the whole batch
    assert ["r01.optimize.k1.py", "r01.optimize.k2.py", "r01.optimize.k3.py"] in gpu.batches  # evaluated together
    assert all(c == 1 for c in counts.values())


def test_bench_suite_as_a_search_reports_its_rounds(tmp_path: Path) -> None:
    def answer(step: str, role: str, body: dict[str, Any]) -> Any:
        prompt = body["messages"][-1]["content"]
        wanted = re.search(r"Propose up\s+to\s+(\d+)", prompt)
        if role == "planner" and wanted:
            ids = permitted_in(prompt)
            return plans(*[(m, f"apply {m}") for m in ids[: int(wanted.group(1))]])
        return responder(step, role, body)

    write_level(tmp_path / "kb", 1, ["Relu", "Gelu"])
    helpers = Path(__file__).with_name("test_bench_helpers.py")
    env = {"OPENAI_API_KEY": "sk-test", "KERNELSKILL_LLM_MODEL": "test-model", "KERNELSKILL_LLM_BACKOFF_S": "0.01",
           "KS_TEST_EVAL_LOG": str(tmp_path / "evals.log")}
    with ScriptedOpenAI(responder=answer) as server:
        out = CliRunner().invoke(main, [
            "bench", "run", "--kernelbench", str(tmp_path / "kb"), "--level", "1", "--rounds", "2",
            "--candidates", "3", "--frontier", "2", "--home", str(tmp_path / "home"), "--suite",
            str(tmp_path / "suite"), "--base-url", server.base_url, "--evaluator",
            f"{helpers}:CountingEvaluator", "--retriever", f"{helpers}:StandInRetriever", "--gpu-slots", "2",
            "--no-progress"], env=env)
        assert out.exit_code == 0, out.output[-3000:]
    report = suite_report(Suite.open(tmp_path / "suite"))
    rounds = report["search_rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2] and all(r["tasks"] == 2 for r in rounds)
    assert rounds[1]["candidates"] >= 6  # three per task, plus their repairs
    assert "## Search rounds" in suite_markdown(report)
    assert all(t["rounds"] for t in report["tasks"])


def test_a_plans_answer_is_checked_like_the_planner_checks_it() -> None:
    expects = json_expects(plans_schema(), ["a", "b", "c"]) | {"plans_wanted": 2}
    assert check_answer(expects, plans(("a", "x"), ("b", "y"))) == ""
    assert "not in the permitted list" in check_answer(expects, plans(("a", "x"), ("z", "y")))
    assert "at most 2" in check_answer(expects, plans(("a", "x"), ("b", "y"), ("c", "z")))
    assert "appears twice" in check_answer(expects, plans(("a", "x"), ("a", "y")))
    assert check_answer(expects, json.dumps({"plans": []})) == "no plans in the answer"
    one = json_expects(plans_schema(), ["a"]) | {"plans_wanted": 2}
    assert check_answer(one, plans(("a", "x"), ("a", "a variant"))) == ""  # one method permitted: two variants


class HarnessLimitEvaluator(BatchEvaluator):
    """A candidate marked ``status=timeout`` times out in the harness's own timing stage (not the code's fault)."""

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        result = super().evaluate(task, candidate, seed=seed)
        if result["status"] == "timeout":
            result["details"] = {"stage": "timing", "worker_seconds": 30.0}
        return result


def test_rounds_of_harness_limits_only_stop_the_search_without_repairs(tmp_path: Path) -> None:
    script = {"r00.generate.1": [fenced(kernel("speedup=1.00", "seed"))]}
    for r in (1, 2):
        script[f"r0{r}.plan.p1.1"] = [plans(("coalesced_access", "a"), ("kernel_fusion", "b"))]
        for k in (1, 2):
            script[f"r0{r}.optimize.k{k}.1"] = [fenced(kernel("status=timeout", f"t{r}{k}"))]
    with ScriptedOpenAI(script) as server:
        task = tmp_path / "relu2.py"
        task.write_text(TASK)
        options = LoopOptions(rounds=4, candidates_per_round=2, frontier=1)
        run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), HarnessLimitEvaluator(),
                      retriever(), options).execute()
        counts = Counter(server.steps())
    assert counts == Counter({step: 1 for step in script})  # no diagnosis, no repair, no third round
    assert [e["step"] for e in run.log.of_type("harness_gave_up")] == ["r02"]
    assert result.status == "finished" and result.best["candidate"] == "candidates/r00.generate.py"
    # the harness's limit is not the method's failure: both methods are offered again in round 2
    assert run.log.find("r02.plan.p1", "plan")["data"]["filtered"] == {}
