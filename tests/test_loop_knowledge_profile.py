"""The third arm (``knowledge: profile``): the loop of the ``none`` arm (no query, the planner names any
technique) plus the parent's profile and its measured counters, so an ablation can tell what the measurements
give from what the knowledge base gives.

The real ``openai`` client talks to the local test server; the GPU is the scripted evaluator, whose profile is a
real H200 capture of a kernel that is not one of the KB's worked examples (tests/data/h200_profiles/l2_12);
the counters are read by the real profile reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelskill.pipeline.loop import Loop
from kernelskill.pipeline.loop.llm import LLMClient
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop import llm_settings
from tests.test_loop_helpers import ScriptedEvaluator, StandInRetriever, fenced, kernel, review
from tests.test_loop_knowledge_none import arm_run, free_plan, kb_words

CAPTURE = Path(__file__).parent / "data" / "h200_profiles" / "l2_12.csv"


class ProfilingEvaluator(ScriptedEvaluator):
    """The scripted GPU, whose profile step returns a real ncu capture."""

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        self._record("profile", candidate)
        return {"ok": True, "message": "", "csv": CAPTURE.read_text()}


SCRIPT = {
    "r00.generate.1": [fenced(kernel("speedup=1.10", "seed"))],
    "r01.plan.1": [free_plan("register_tile_4x4")],
    "r01.optimize.1": [fenced(kernel("speedup=1.70", "tiled"))],
    "r01.review.1": [review(True)],
}


def test_profile_arm_shows_the_counters_and_no_kb_content(tmp_path: Path) -> None:
    run, options = arm_run(tmp_path, "profile", rounds=1)
    evaluator, retriever = ProfilingEvaluator(), StandInRetriever()
    with ScriptedOpenAI(SCRIPT) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), evaluator, retriever,
                      options).execute()
        assert sorted(set(server.steps())) == sorted(SCRIPT)

    assert result.status == "finished" and result.best["method"] == "register_tile_4x4"
    assert retriever.calls == ["numbers:profile.r00.generate.csv"]  # the counters read; no query at all
    assert [k for k, _ in evaluator.calls].count("profile") == 1

    prompt = next(e for e in run.log.of_type("llm_call") if e["step"] == "r01.plan.1")["data"]["messages"][-1]
    text = prompt["content"]
    assert "## The parent's profile" in text
    assert "`linear_bias`" in text and "`scale_leaky_relu`" in text  # both kernels of the capture, with numbers
    numbers = run.log.find("numbers.r00.generate", "profile_numbers")["data"]["numbers"]
    top = numbers["kernels"][0]
    assert top["name"] == "linear_bias" and top["share_pct"] > 50
    assert f"dram_throughput_pct = {top['fields']['dram_throughput_pct']:.4g}" in text
    # what the KB would have added is absent: no diagnosis, tier, case, method, guidance or evidence
    for word in ("Permitted methods", "bottleneck", "tier", "case:", "worked example", "Diagnosis"):
        assert word not in text, word
    leaked = [w for w in kb_words() if w in text]
    assert leaked == [], f"the profile arm's planner prompt carries KB content: {leaked}"
    plan = run.log.find("r01.plan", "plan")["data"]
    assert plan["knowledge"] == "profile" and plan["offered"] == []
    assert run.manifest["options"]["knowledge"] == "profile"


def test_profile_arm_without_a_capture_says_so(tmp_path: Path) -> None:
    """No ncu on the GPU box: the planner is told the profile is not available, and the run goes on."""
    run, options = arm_run(tmp_path, "profile", rounds=1)
    with ScriptedOpenAI(SCRIPT) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), ScriptedEvaluator(),
                      StandInRetriever(), options).execute()
    assert result.status == "finished"
    text = next(e for e in run.log.of_type("llm_call") if e["step"] == "r01.plan.1")["data"]["messages"][-1]["content"]
    assert "## The parent's profile\nNot available: scripted: no ncu on this machine" in text
    assert json.loads((run.path / "run.json").read_text())["options"]["knowledge"] == "profile"


def test_the_suite_driver_serves_the_profile_arm_and_the_seed_advice(tmp_path: Path) -> None:
    """A suite (``bench run --knowledge profile``) hands its runs the driver's one-at-a-time retriever: it
    passes the profile arm's counters (and the KB arm's seed advice) through to the real ones."""
    from kernelskill.pipeline.bench.driver import SerialRetriever

    run, options = arm_run(tmp_path, "profile", rounds=1)
    inner = StandInRetriever()
    with ScriptedOpenAI(SCRIPT) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), ProfilingEvaluator(),
                      SerialRetriever(inner), options).execute()
    assert result.status == "finished" and inner.calls == ["numbers:profile.r00.generate.csv"]
    assert hasattr(SerialRetriever(inner), "task_advice")
