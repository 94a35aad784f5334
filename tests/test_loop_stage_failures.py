"""A timeout or out-of-memory in one of the harness's own stages (the reference, the second shape set,
timing) is the harness's failure: recorded as ``harness_failure`` with per-stage timings, never sent to the
diagnoser, no repair spent on it, the method offered again, and the report shows it. The same status in the
candidate's own stage (its first forward) is the candidate's and is diagnosed as before.

The real ``openai`` client talks to the local test server; the GPU is a scripted evaluator whose results
have the shape the harness gives (``details.stage``, ``details.stage_times_s``, ``worker_seconds``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kernelskill.pipeline.loop import Loop, LoopOptions, eval_view
from kernelskill.pipeline.loop.adapters import stage_timings
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import RunStore
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop import llm_settings
from tests.test_loop_helpers import TASK, ScriptedEvaluator, fenced, kernel, planner_answer, review

#: a worker killed in alt_shapes after 120.4 s: it leaves its stage and its total, not a result
KILLED_IN = {"alt_shapes": {"status": "timeout", "stage": "alt_shapes"},
             "first_forward": {"status": "timeout", "stage": "first_forward"},
             "reference_forward": {"status": "oom", "stage": "reference_forward"}}
STARTS = {"load_task": 0.0, "build_reference": 0.4, "reference_forward": 0.5, "import_candidate": 1.9,
          "first_forward": 2.0, "correctness_trial_0": 2.3, "determinism": 3.9, "alt_shapes": 4.6}


class StageEvaluator(ScriptedEvaluator):
    """``# killed: STAGE`` in a candidate: the worker hit its limit in that stage."""

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        killed = re.search(r"# killed: (\w+)", candidate.read_text())
        if killed is None:
            return super().evaluate(task, candidate, seed=seed)
        self._record("evaluate", candidate)
        spec = KILLED_IN[killed.group(1)]
        starts = {k: v for k, v in STARTS.items() if v <= STARTS[spec["stage"]]}
        return {"status": spec["status"], "correct": False, "build_log": "",
                "message": f"no result within 120 s (during {spec['stage']}); the worker's process group was killed",
                "details": {"stage": spec["stage"], "worker_seconds": 120.4, "stage_times_s": starts}}


def killed(stage: str, tag: str) -> str:
    return f"# killed: {stage}\n" + kernel("status=timeout", tag)


def run_loop(tmp_path: Path, script: dict[str, list[Any]], rounds: int) -> tuple[Loop, ScriptedOpenAI]:
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=rounds)
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(script) as server:
        loop = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), StageEvaluator(),
                    _Retriever(), options)
        loop.execute()
    return loop, server


class _Retriever:
    def query(self, kernel: Path, *, task: Path, profile: Path | None, protocol: str | None = None,
              precision: str | None = None
              ) -> dict[str, Any]:
        return {"static_only": True, "tier": "unknown", "bottleneck": "memory_bandwidth", "case": None,
                "permitted": [{"id": "vectorized_access_16b", "name": "float4", "guidance": "use float4"},
                              {"id": "kernel_fusion", "name": "fusion", "guidance": "fuse"}],
                "forbidden": [], "profile": None}


def test_a_harness_stage_timeout_is_reported_not_repaired(tmp_path: Path) -> None:
    script = {
        "r00.generate.1": [fenced(kernel("speedup=1.20", "seed"))],
        "r01.plan.1": [planner_answer(0)],
        "r01.optimize.1": [fenced(killed("alt_shapes", "big"))],
        "r02.plan.1": [planner_answer(0)],  # offered again: the method did not fail, the harness did
        "r02.optimize.1": [fenced(kernel("speedup=1.50", "vec"))],
        "r02.review.1": [review(True)],
        "r03.plan.1": [planner_answer(1)],
        "r03.optimize.1": [fenced(killed("first_forward", "hang"))],
        "r04.diagnose.1": [json.dumps({"error_class": "timeout", "root_cause": "the loop never ends",
                                       "fix": "bound the loop"})],
        "r04.repair.1": [fenced(kernel("speedup=1.60", "fixed"))],
        "r04.review.1": [review(True)],
    }
    loop, server = run_loop(tmp_path, script, rounds=4)
    assert sorted(set(server.steps())) == sorted(script)  # in particular: no r02.diagnose, no r02.repair
    attempts = [(a.round, a.branch, a.method, a.result_class) for a in loop.memory.attempts]
    assert attempts == [(0, "generate", None, "ok"), (1, "optimize", "vectorized_access_16b", "harness_failure"),
                        (2, "optimize", "vectorized_access_16b", "ok"), (3, "optimize", "kernel_fusion", "timeout"),
                        (4, "repair", "kernel_fusion", "ok")]
    run = loop.run
    failures = run.log.of_type("harness_failure")
    assert [e["step"] for e in failures] == ["r01.eval"]
    data = failures[0]["data"]
    assert data["status"] == "timeout" and data["stage"] == "alt_shapes"
    assert data["stage_timings"]["alt_shapes"] == pytest.approx(120.4 - 4.6)
    assert data["stage_timings"]["reference_forward"] == pytest.approx(1.4)
    plan2 = next(e["data"] for e in run.log.of_type("plan") if e["step"] == "r02.plan")
    assert "vectorized_access_16b" in plan2["offered"] and plan2["filtered"] == {}
    # the next planner reads it as the harness's failure
    prompt = next(e for e in run.log.of_type("llm_call") if e["step"] == "r02.plan.1")["data"]["messages"][-1]
    assert "harness_failure (not evaluated: timeout in the harness's own alt_shapes stage" in prompt["content"]
    # the candidate's own timeout is diagnosed, with its stage and timings
    diagnose = next(e for e in run.log.of_type("llm_call") if e["step"] == "r04.diagnose.1")["data"]["messages"][-1]
    assert "stage: first_forward (seconds per stage: load_task 0.4" in diagnose["content"]
    assert "first_forward 118.4" in diagnose["content"]
    report = (run.path / "report.md").read_text()
    assert "## Harness failures (not the candidates' code)" in report
    assert "| r01.eval | candidates/r01.optimize.py | timeout | alt_shapes |" in report
    assert "alt_shapes 115.8" in report and "| 1 | optimize | vectorized_access_16b | " in report


def test_two_harness_failures_in_a_row_stop_the_run(tmp_path: Path) -> None:
    script = {
        "r00.generate.1": [fenced(kernel("speedup=1.20", "seed"))],
        "r01.plan.1": [planner_answer(0)],
        "r01.optimize.1": [fenced(killed("reference_forward", "a"))],
        "r02.plan.1": [planner_answer(1)],
        "r02.optimize.1": [fenced(killed("alt_shapes", "b"))],
    }
    loop, server = run_loop(tmp_path, script, rounds=6)
    assert sorted(set(server.steps())) == sorted(script)
    gave_up = loop.run.log.of_type("harness_gave_up")
    assert len(gave_up) == 1 and gave_up[0]["data"]["failures"] == 2
    finished = loop.run.log.of_type("run_finished")[-1]["data"]
    assert finished["rounds"] == 2 and finished["best"]["step"] == "r00.generate"  # the seed stays the best
    report = (loop.run.path / "report.md").read_text()
    assert "| r01.eval | candidates/r01.optimize.py | oom | reference_forward |" in report
    assert "run stopped after 2 in a row" in report


def test_eval_view_names_the_stage_and_its_seconds() -> None:
    done = {"status": "ok", "correct": True, "speedup": 2.0,
            "details": {"stage": "timing", "stage_times_s": {"load_task": 0.0, "timing": 3.0, "end": 5.5}}}
    view = eval_view(done)
    assert view["stage"] == "timing" and not view["harness_failure"]
    assert view["stage_timings"] == {"load_task": 3.0, "timing": 2.5}
    oom = eval_view({"status": "oom", "details": {"stage": "timing", "worker_seconds": 9.0}})
    assert oom["harness_failure"] and oom["stage_timings"] == {"timing": 9.0}
    mine = eval_view({"status": "timeout", "details": {"stage": "first_forward"}})
    assert not mine["harness_failure"]  # the candidate's own forward: its failure
    assert stage_timings({}) == {} and eval_view({"status": "mismatch"})["stage"] == ""
