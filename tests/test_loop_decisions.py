"""Decisions from the measurements (issue 28, item 2): whether a candidate beats its parent is decided by the
interval of the ratio of their speedups (the IQR rule where a result carries no interval), never by an LLM
reading medians; the reviewer only reviews the code; the final pick is the fastest correct candidate whose
re-verification on a fresh seed passed, and ``final_pick`` gives every view that one number.

The loop runs for real on run folders (the real ``openai`` client against the local test server for the LLM's
answers, the stand-in retriever); the GPU is a scripted evaluator whose results carry ``speedup_ci`` as the
harness now reports it.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from kernelskill.pipeline.loop import Loop, LoopOptions
from kernelskill.pipeline.loop.decisions import compare_to_parent, ratio_interval, speedup_interval
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import RunStore
from kernelskill.pipeline.runs.final import final_pick
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop import llm_settings
from tests.test_loop_helpers import TASK, StandInRetriever, fenced, planner_answer, review

#: what the fresh-seed re-verification measures, relative to the round's measurement (a different number)
VERIFY_FACTOR = 0.97


def candidate(speedup: float, lo: float, hi: float, tag: str) -> str:
    """A ModelNew whose scripted measurement is ``speedup`` with the 95 % interval [lo, hi]."""
    return (f"# harness: speedup={speedup} ci={lo}:{hi}\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n"
            f"    def forward(self, x):\n        return torch.relu(x) * 2.0  # {tag}\n")


class IntervalEvaluator:
    """The GPU side: each result carries its speedup's 95 % interval; a re-verification (a seed given) measures
    ``VERIFY_FACTOR`` times the round's value."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def check(self) -> None:
        return None

    def evaluate(self, task: Path, cand: Path, *, seed: int | None = None) -> dict[str, Any]:
        self.calls.append(("evaluate", cand.name))
        m = re.search(r"# harness: speedup=(\S+) ci=(\S+):(\S+)", cand.read_text())
        assert m is not None
        speed, lo, hi = (float(v) for v in m.groups())
        if seed is not None:
            speed, lo, hi = speed * VERIFY_FACTOR, lo * VERIFY_FACTOR, hi * VERIFY_FACTOR
        return {"status": "ok", "correct": True, "speedup": speed, "speedup_ci": [lo, hi], "baseline_ms": 3.0,
                "candidate_ms": 3.0 / speed, "candidate_iqr_ms": 0.0, "baseline_iqr_ms": 0.0, "message": "",
                "build_log": "", "details": {"seed": seed}}

    def profile(self, task: Path, cand: Path) -> dict[str, Any]:
        self.calls.append(("profile", cand.name))
        return {"ok": False, "message": "scripted: no ncu", "csv": ""}


# the rule itself --------------------------------------------------------------------------------------------
def test_ratio_interval_combines_the_two_intervals_in_log_space() -> None:
    lo, hi = ratio_interval(2.2, (2.1, 2.3), 2.0, (1.95, 2.05))
    want_lo = math.exp(math.log(1.1) - math.hypot(math.log(2.2 / 2.1), math.log(2.05 / 2.0)))
    want_hi = math.exp(math.log(1.1) + math.hypot(math.log(2.3 / 2.2), math.log(2.0 / 1.95)))
    assert (lo, hi) == (pytest.approx(want_lo), pytest.approx(want_hi))
    assert lo > 1.0  # improved
    # a point outside its own interval counts no negative width
    assert ratio_interval(2.0, (2.1, 2.3), 2.0, (2.0, 2.0))[0] == pytest.approx(1.0)


def test_interval_rule_verdicts_and_iqr_fallback() -> None:
    parent = {"speedup": 2.0, "speedup_ci": [1.95, 2.05], "candidate_ms": 1.5, "candidate_iqr_ms": 0.0}
    assert compare_to_parent({"speedup": 2.2, "speedup_ci": [2.1, 2.3]}, parent).verdict == "improved"
    wide = compare_to_parent({"speedup": 2.1, "speedup_ci": [1.9, 2.3]}, parent)
    assert wide.verdict == "within_noise" and wide.rule == "interval" and wide.ratio_low < 1.0 < wide.ratio_high
    assert compare_to_parent({"speedup": 1.5, "speedup_ci": [1.45, 1.55]}, parent).verdict == "slower"
    # one side without an interval: the IQR rule (relative IQR of the medians) decides
    bare = compare_to_parent({"speedup": 2.1, "candidate_ms": 1.43, "candidate_iqr_ms": 0.0}, parent)
    assert bare.rule == "iqr" and bare.improved
    noisy = compare_to_parent({"speedup": 2.1, "candidate_ms": 1.43, "candidate_iqr_ms": 0.143}, parent)
    assert noisy.rule == "iqr" and noisy.verdict == "within_noise" and "10.0%" in noisy.reason
    # malformed intervals are no intervals
    for bad in ([2.0], [0.0, 1.0], [2.0, 1.0], ["a", 1.0], [True, 2.0], None):
        assert speedup_interval({"speedup_ci": bad}) is None


# the loop on run folders ----------------------------------------------------------------------------------
#: r00 seed 1.00x [0.98, 1.02]; r01 2.00x [1.95, 2.05]: improved, accepted (the reviewer passes the code);
#: r02 2.08x [1.90, 2.26] on r01: a higher median, but the ratio's interval straddles 1: within noise, kept
#: (no reviewer asked); r03 again on r01: 3.00x [2.9, 3.1], improved, but the code review finds a cached
#: output: rejected. The final pick is r02 (the fastest correct candidate not suspected), re-verified.
SCRIPT = {
    "r00.generate.1": [fenced(candidate(1.00, 0.98, 1.02, "seed"))],
    "r01.plan.1": [planner_answer(0)],
    "r01.optimize.1": [fenced(candidate(2.00, 1.95, 2.05, "coal"))],
    "r01.review.1": [review(True)],
    "r02.plan.1": [planner_answer(1)],
    "r02.optimize.1": [fenced(candidate(2.08, 1.90, 2.26, "vec"))],
    "r03.plan.1": [planner_answer(1)],
    "r03.optimize.1": [fenced(candidate(3.00, 2.90, 3.10, "cache"))],
    "r03.review.1": [json.dumps({"accept": False, "reason": "forward returns a tensor cached across calls"})],
}


def test_the_measurements_decide_and_the_final_pick_is_the_fastest_verified(tmp_path: Path) -> None:
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=3, max_repairs=0)
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    evaluator = IntervalEvaluator()
    with ScriptedOpenAI(SCRIPT) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), evaluator, StandInRetriever(),
                      options).execute()
        assert sorted(server.steps()) == sorted(SCRIPT)  # r02 was never shown to the reviewer

    attempts = {e["data"]["step"]: e["data"] for e in run.log.of_type("attempt")}
    r01, r02, r03 = attempts["r01.optimize"], attempts["r02.optimize"], attempts["r03.optimize"]
    assert r01["accepted"] and r01["speed_decision"]["rule"] == "interval" and r01["speed_decision"]["improved"]
    assert not r02["accepted"] and r02["review_by"] == "rule"
    assert r02["speed_decision"]["verdict"] == "within_noise" and r02["speed_decision"]["ratio_low"] < 1.0
    assert not r03["accepted"] and r03["review_by"] == "reviewer" and "cached" in r03["review"]
    assert r03["speed_decision"]["verdict"] == "improved"  # fast, but the code review rejected it
    # r02 and r03 were planned on r01: r02 did not replace its parent
    assert r02["parent"] == r03["parent"] == "candidates/r01.optimize.py"

    # the reviewer saw the diff against the parent and the noise rule, and was not asked about speed
    review_prompt = run.log.find("r03.review.1", "llm_call")["data"]["messages"][-1]["content"]
    assert "--- candidates/r01.optimize.py" in review_prompt and "+++ candidates/r03.optimize.py" in review_prompt
    assert "-        return torch.relu(x) * 2.0  # coal" in review_prompt
    assert "lies wholly above 1.0" in review_prompt and "The speed question is settled" in review_prompt

    # the final pick: r02 (2.08x) is the fastest correct candidate not suspected; the suspect r03 was never tried
    verifies = [e["step"] for e in run.log.of_type("eval") if e["step"].startswith("verify.")]
    assert verifies == ["verify.r02.optimize"]
    assert result.verified and result.best["candidate"] == "candidates/r02.optimize.py"
    pick = final_pick(run)
    assert pick is not None and pick["candidate"] == "candidates/r02.optimize.py"
    assert pick["speedup"] == pytest.approx(2.08 * VERIFY_FACTOR)  # the re-verification's own measurement
    assert pick["speedup_ci"] == [pytest.approx(1.90 * VERIFY_FACTOR), pytest.approx(2.26 * VERIFY_FACTOR)]
    assert pick["found_speedup"] == pytest.approx(2.08)
    # the same function on the events alone (a view that cuts a run at a round) gives the same answer
    assert final_pick(list(run.log.events)) == pick
    assert (run.path / "best.py").read_text().count("# vec") == 1


def test_a_run_that_is_not_finished_has_no_final_pick(tmp_path: Path) -> None:
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=1, stop_before=["gpu"])
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI({"r00.generate.1": SCRIPT["r00.generate.1"]}) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), IntervalEvaluator(),
                      StandInRetriever(), options).execute()
    assert result.status == "paused" and final_pick(run) is None


def test_the_final_pick_skips_a_candidate_whose_reverification_fails(tmp_path: Path) -> None:
    """The fastest candidate fails on the fresh seed: the next fastest that passes is the pick."""
    class FlakyOnFreshSeed(IntervalEvaluator):
        def evaluate(self, task: Path, cand: Path, *, seed: int | None = None) -> dict[str, Any]:
            out = super().evaluate(task, cand, seed=seed)
            if seed is not None and "# vec" in cand.read_text():
                return {"status": "mismatch", "correct": False, "message": "max abs diff 0.3 on seed " + str(seed)}
            return out

    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=2, max_repairs=0)
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    script = {k: v for k, v in SCRIPT.items() if not k.startswith("r03")}
    with ScriptedOpenAI(script) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), FlakyOnFreshSeed(),
                      StandInRetriever(), options).execute()
    verifies = [e["step"] for e in run.log.of_type("eval") if e["step"].startswith("verify.")]
    assert verifies == ["verify.r02.optimize", "verify.r01.optimize"]
    assert result.best["candidate"] == "candidates/r01.optimize.py"
    assert final_pick(run)["speedup"] == pytest.approx(2.00 * VERIFY_FACTOR)


def test_a_suspect_candidate_is_no_frontier_member_of_a_search(tmp_path: Path) -> None:
    """K = 2 from a frontier of 2: the round's fastest candidate is rejected by the code review; the frontier
    after the round and the final pick are the honest ones."""
    def plans(*items: tuple[str, str]) -> str:
        return json.dumps({"plans": [{"method": m, "rationale": "r", "plan": p} for m, p in items]})

    script = {
        "r00.generate.1": [fenced(candidate(1.00, 0.98, 1.02, "seed"))],
        "r01.plan.p1.1": [plans(("coalesced_access", "coalesce"), ("vectorized_access_16b", "float4"))],
        "r01.optimize.k1.1": [fenced(candidate(3.00, 2.90, 3.10, "cache"))],
        "r01.optimize.k2.1": [fenced(candidate(1.50, 1.45, 1.55, "vec"))],
        "r01.review.k1.1": [json.dumps({"accept": False, "reason": "replays the first call's output"})],
        "r01.review.k2.1": [review(True)],
    }
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=1, candidates_per_round=2, frontier=2, max_repairs=0)
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(script) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), IntervalEvaluator(),
                      StandInRetriever(), options).execute()
        assert sorted(server.steps()) == sorted(script)
    front = run.log.find("r01.round", "round")["data"]["frontier"]
    assert [f["candidate"] for f in front] == ["candidates/r01.optimize.k2.py", "candidates/r00.generate.py"]
    assert result.best["candidate"] == "candidates/r01.optimize.k2.py"
    assert final_pick(run)["speedup"] == pytest.approx(1.50 * VERIFY_FACTOR)
