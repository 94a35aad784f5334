"""Agent roles: code extraction, strict templates, the planner's re-ask and fallback, the reviewer's checks."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest

from kernelskill.config import LLMSettings
from kernelskill.pipeline.loop.agents import ROLES, Agents, extract_code, messages_for, render
from kernelskill.pipeline.loop.llm import LLMClient
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import TASK, kernel

CODE = kernel("speedup=1.0")
PERMITTED = [{"id": "coalesced_access", "name": "Coalesced access", "guidance": "g1"},
             {"id": "kernel_fusion", "name": "Kernel fusion", "guidance": "g2"}]
QUERY = {"tier": "H", "bottleneck": "memory_bandwidth", "static_only": False, "forbidden": [],
         "case": {"id": "c1", "title": "t", "rationale": "r"}}
MEMORY = {"attempts": [], "repairs": [], "total_attempts": 0}


def test_extracts_the_block_that_defines_modelnew() -> None:
    helper = "```python\nimport torch\nx = 1\n```\n"
    cuda = "```cuda\n__global__ void k() {}\n```\n"
    assert extract_code(f"Plan first.\n{helper}Then:\n```python\n{CODE}```\nDone.")[0] == CODE
    assert extract_code(f"```\n{CODE}```")[0] == CODE  # no language tag
    assert extract_code(f"{cuda}```py\n{CODE}```")[0] == CODE
    older = CODE.replace("speedup=1.0", "speedup=0.5")
    assert extract_code(f"```python\n{older}```\nbetter:\n```python\n{CODE}```")[0] == CODE  # the last one
    assert extract_code(f"```python\n{CODE}")[0] == CODE  # the fence was never closed (truncated answer)
    assert extract_code(CODE)[0] == CODE  # bare code without any fence
    assert extract_code(helper) == (None, "no code block defines class ModelNew")
    assert extract_code("") == (None, "the answer was empty")
    code, reason = extract_code("```python\nclass ModelNew(torch.nn.Module):\n    def forward(self x):\n```")
    assert code is None and reason.startswith("the code does not parse: line 2")


def test_templates_are_strict_and_every_role_renders() -> None:
    ctx = {"task_source": TASK, "kernel_source": CODE, "gpu": {"name": "H200", "arch": "sm_90", "notes": ""},
           "memory": MEMORY, "failure": {"status": "mismatch", "message": "max abs diff 3.2", "build_log": ""},
           "diagnosis": {"root_cause": "rc", "fix": "fx"}, "parent_speedup": 1.5, "query": QUERY,
           "permitted": PERMITTED, "filtered": {}, "forbidden": [], "rejection": "",
           "full_methods": 6, "evidence": [],
           "method": PERMITTED[0], "plan": {"plan": "p"}, "candidate": {"step": "r01.x", "branch": "optimize",
                                                                       "method": "m"},
           "result": {"status": "ok", "correct": True, "speedup": 2.0, "candidate_ms": 1.0,
                      "candidate_iqr_ms": 0.1, "baseline_ms": 2.0},
           "parent": {"step": "r00.generate", "result": {"speedup": 1.0, "candidate_ms": 2.0, "candidate_iqr_ms": 0.1}},
           "decision": {"reason": "measured 2.000x vs parent 1.000x"}, "diff": "", "noise_rule": "r"}
    for role in ROLES:
        msgs = messages_for(role, **ctx)
        assert msgs[0]["role"] == "system" and msgs[1]["content"].strip()
    assert "1. `coalesced_access`" in messages_for("planner", **ctx)[1]["content"]
    # the measured worked example travels into the planner, labelled with what the example computes and
    # ranked by its closeness to this task; negative evidence included
    measured = [dict(PERMITTED[0], measured={"speedup": 1.01, "verdict": "no_gain", "hardware": "NVIDIA H200"},
                     example={"label": "Row-bias add on 32768 x 4096 fp32", "similarity": 0.1, "shared": []}),
                dict(PERMITTED[1], measured={"speedup": 3.01, "verdict": "pays", "hardware": "NVIDIA H200"},
                     example={"label": "relu(1.7 x + 0.3) ** 2 on 2**26 fp32", "similarity": 0.6,
                              "shared": ["elementwise"]})]
    planner = Agents(None).plan_messages(task_source=TASK, kernel_source=CODE, parent_speedup=1.5, query=QUERY,
                                         permitted=measured, filtered={}, memory=MEMORY)[1]["content"]
    fusion = ('- `kernel_fusion`: measured 3.01x on the worked example "relu(1.7 x + 0.3) ** 2 on 2**26 fp32" '
              "(NVIDIA H200); it shares elementwise with this task")
    coalesced = ('- `coalesced_access`: measured 1.01x on the worked example "Row-bias add on 32768 x 4096 fp32" '
                 "(NVIDIA H200), a gain inside the timing noise; a different operation from this task")
    assert fusion in planner and coalesced in planner
    assert planner.index(fusion) < planner.index(coalesced)  # the closer example first
    with pytest.raises(jinja2.UndefinedError):
        render("planner.j2", task_source=TASK)


def agents(server: ScriptedOpenAI, tmp_path: Path) -> Agents:
    settings = LLMSettings(base_url=server.base_url, api_key="sk-test", model="m", backoff_s=0.01)
    return Agents(LLMClient.from_settings(settings, run_dir=tmp_path))


def plan(a: Agents, **kw):
    return a.plan(step="r01.plan", round_=1, task_source=TASK, kernel_source=CODE, parent_speedup=1.0,
                  query=QUERY, permitted=PERMITTED, filtered={"split_k": "round 2: mismatch"}, memory=MEMORY, **kw)


def test_planner_reask_with_reason_then_fallback(tmp_path: Path) -> None:
    good = json.dumps({"method": "kernel_fusion", "plan": "fuse"})
    with ScriptedOpenAI({"r01.plan.1": [json.dumps({"method": "split_k", "plan": "x"})],
                         "r01.plan.2": [good]}) as server:
        decision = plan(agents(server, tmp_path / "a"))
        assert (decision.method, decision.asks, decision.fallback) == ("kernel_fusion", 2, False)
        reask = server.requests[1]["messages"][-1]["content"]
        assert "`split_k` was not offered again: it already failed on this parent (round 2: mismatch)" in reask
    with ScriptedOpenAI({"r01.plan.1": ['{"method": "tensor_core_mma", "plan": "x"}'],
                         "r01.plan.2": ["no idea"]}) as server:
        decision = plan(agents(server, tmp_path / "b"))
        assert decision.fallback and decision.method == "coalesced_access" and decision.asks == 2
        assert "`tensor_core_mma` is not in the permitted list" in decision.rejections[0]
        assert decision.rejections[1] == "no JSON object found"


def test_code_role_reasks_once_then_gives_up(tmp_path: Path) -> None:
    with ScriptedOpenAI({"r00.generate.1": ["```python\nprint(1)\n```"], "r00.generate.2": ["still nothing"]}) as s:
        answer = agents(s, tmp_path).generate(step="r00.generate", round_=0, task_source=TASK, memory=MEMORY)
        assert answer.code is None and answer.asks == 2 and answer.reason == "no code block defines class ModelNew"
        assert "could not be used: no code block defines class ModelNew" in s.requests[1]["messages"][-1]["content"]


def test_the_measurements_decide_speed_and_the_reviewer_only_reviews_code(tmp_path: Path) -> None:
    """A slower or within-noise candidate is turned down by the rule without asking anyone; a faster one goes to
    the reviewer as code, with its diff, and only its rejection (a suspected cheat) can change the outcome."""
    parent = {"step": "r01.optimize", "result": {"speedup": 2.0, "candidate_ms": 1.0, "candidate_iqr_ms": 0.01}}
    result = {"status": "ok", "correct": True, "speedup": 1.8, "candidate_ms": 1.1, "candidate_iqr_ms": 0.01,
              "baseline_ms": 2.0}
    cand = {"step": "r02.optimize", "branch": "optimize", "method": "m"}
    with ScriptedOpenAI({"r03.review.1": ['{"accept": false, "reason": "forward returns a cached tensor (line 12)"}'],
                         "r04.review.1": ["?"], "r04.review.2": ["??"],
                         "r06.review.1": ['{"accept": true, "reason": "computes every element"}']}) as server:
        a = agents(server, tmp_path)
        slower = a.review(step="r02.review", round_=2, task_source=TASK, candidate=cand, result=result,
                          parent=parent, memory=MEMORY)
        assert not slower.accept and slower.by == "rule" and "1.800x <= parent 2.000x" in slower.reason
        assert slower.speed is not None and slower.speed.verdict == "slower"
        faster = dict(result, speedup=2.05)
        cheat = a.review(step="r03.review", round_=3, task_source=TASK, candidate=cand, result=faster,
                         parent=parent, memory=MEMORY, diff="--- parent\n+++ candidate\n+_cache = None")
        assert not cheat.accept and cheat.by == "reviewer" and "cached tensor" in cheat.reason
        prompt = server.requests[0]["messages"][-1]["content"]
        assert "+_cache = None" in prompt and "The speed question is settled" in prompt
        assert "faster than its parent" not in prompt.split("## What the measurements decided")[0]
        ruled = a.review(step="r04.review", round_=4, task_source=TASK, candidate=cand, result=faster,
                         parent=parent, memory=MEMORY)
        assert ruled.accept and ruled.by == "rule" and "no usable review" in ruled.reason
        wrong = a.review(step="r05.review", round_=5, task_source=TASK, candidate=cand,
                         result={"status": "mismatch", "correct": False}, parent=parent, memory=MEMORY)
        assert not wrong.accept and wrong.reason == "harness: mismatch"
        passed = a.review(step="r06.review", round_=6, task_source=TASK, candidate=cand, result=faster,
                          parent=parent, memory=MEMORY)
        assert passed.accept and passed.by == "reviewer" and "computes every element" in passed.reason
        # r02 (slower) and r05 (wrong) never reached the LLM
        assert server.steps() == ["r03.review.1", "r04.review.1", "r04.review.2", "r06.review.1"]


def test_a_gain_inside_the_timing_noise_is_not_accepted(tmp_path: Path) -> None:
    """Without intervals the IQR rule decides: 2.02x over a 2.00x parent whose medians carry a 5 % IQR is no
    gain (the reviewer is not even asked); 2.2x is, and then the reviewer reads the code."""
    parent = {"step": "r01.optimize", "result": {"speedup": 2.0, "candidate_ms": 1.0, "candidate_iqr_ms": 0.05}}
    noisy = {"status": "ok", "correct": True, "speedup": 2.02, "candidate_ms": 0.99, "candidate_iqr_ms": 0.01,
             "baseline_ms": 2.0}
    cand = {"step": "r02.optimize", "branch": "optimize", "method": "m"}
    with ScriptedOpenAI({"r03.review.1": ['{"accept": true, "reason": "honest kernel"}']}) as server:
        a = agents(server, tmp_path)
        inside = a.review(step="r02.review", round_=2, task_source=TASK, candidate=cand, result=noisy,
                          parent=parent, memory=MEMORY)
        assert not inside.accept and inside.by == "rule" and "within the timing noise (5.0%)" in inside.reason
        clear = a.review(step="r03.review", round_=3, task_source=TASK, candidate=cand,
                         result=dict(noisy, speedup=2.2, candidate_ms=0.9), parent=parent, memory=MEMORY)
        assert clear.accept and clear.by == "reviewer" and clear.speed.rule == "iqr"
        assert server.steps() == ["r03.review.1"]


def test_with_intervals_the_ratio_interval_decides(tmp_path: Path) -> None:
    """Both results carry ``speedup_ci``: 2.2x [2.1, 2.3] over 2.0x [1.95, 2.05] is faster (the ratio's interval
    lies above 1), 2.1x [1.9, 2.3] over the same parent is within noise even though its median beats the IQR
    rule's threshold, and 1.5x [1.45, 1.55] is slower."""
    parent = {"step": "r01.optimize", "result": {"speedup": 2.0, "speedup_ci": [1.95, 2.05], "candidate_ms": 1.0,
                                                 "candidate_iqr_ms": 0.0}}
    cand = {"step": "r02.optimize", "branch": "optimize", "method": "m"}

    def result(speed: float, lo: float, hi: float) -> dict:
        return {"status": "ok", "correct": True, "speedup": speed, "speedup_ci": [lo, hi],
                "candidate_ms": 2.0 / speed, "candidate_iqr_ms": 0.0, "baseline_ms": 2.0}

    with ScriptedOpenAI({"r02.review.1": ['{"accept": true, "reason": "honest kernel"}']}) as server:
        a = agents(server, tmp_path)
        up = a.review(step="r02.review", round_=2, task_source=TASK, candidate=cand, result=result(2.2, 2.1, 2.3),
                      parent=parent, memory=MEMORY)
        assert up.accept and up.speed.rule == "interval" and up.speed.ratio_low > 1.0
        wide = a.review(step="r03.review", round_=3, task_source=TASK, candidate=cand,
                        result=result(2.1, 1.9, 2.3), parent=parent, memory=MEMORY)
        assert not wide.accept and wide.by == "rule" and wide.speed.verdict == "within_noise"
        assert "95 % interval" in wide.reason
        down = a.review(step="r04.review", round_=4, task_source=TASK, candidate=cand,
                        result=result(1.5, 1.45, 1.55), parent=parent, memory=MEMORY)
        assert not down.accept and down.speed.verdict == "slower"
        assert server.steps() == ["r02.review.1"]
        prompt = server.requests[0]["messages"][-1]["content"]
        assert "95 % interval 2.1-2.3" in prompt and "lies wholly above 1.0" in prompt


def test_memory_filters_failed_methods_per_parent_and_keeps_profile_deltas() -> None:
    from kernelskill.pipeline.loop.memory import Attempt, Memory

    m = Memory()
    m.add_attempt(Attempt(round=1, step="r01.optimize", candidate="c/r01.py", parent="c/seed.py", branch="optimize",
                          method="split_k", result_class="mismatch"))
    m.add_attempt(Attempt(round=2, step="r02.optimize", candidate="c/r02.py", parent="c/seed.py", branch="optimize",
                          method="kernel_fusion", result_class="mismatch"))
    m.add_attempt(Attempt(round=3, step="r03.repair", candidate="c/r03.py", parent="c/seed.py", branch="repair",
                          derived_from="c/r02.py",
                          method="kernel_fusion", result_class="ok", correct=True, accepted=True, speedup=1.4))
    m.add_attempt(Attempt(round=4, step="r04.optimize", candidate="c/r04.py", parent="c/r03.py", branch="optimize",
                          method="split_k", result_class="ok", correct=True, review="within noise"))
    # split_k failed on seed; kernel_fusion failed, but its repair succeeded on the same parent
    assert m.failed_methods("c/seed.py") == {"split_k": "round 1: mismatch"}
    assert m.failed_methods("c/r03.py") == {"split_k": "round 4: within noise"}
    m.set_profile_deltas("c/r03.py", {"dram_throughput_pct": 40.0, "kernel_duration_ns": 2000.0},
                         {"dram_throughput_pct": 85.5, "kernel_duration_ns": 900.0, "sm_throughput_pct": 20.0})
    assert m.attempt_for("c/r03.py").profile_deltas == {"kernel_duration_ns": -1100.0, "dram_throughput_pct": 45.5}
    text = render("partials/history.j2", memory=m.view())
    assert "round 3 repair `kernel_fusion` of c/r02.py: ok, speedup 1.400x (accepted as parent)" in text
    assert "kernel_duration_ns -1100.00" in text


def test_code_roles_are_told_the_candidate_format() -> None:
    """The generator can ask for the harness's fast path instead of load_inline; JSON roles are unaffected."""
    from kernelskill.pipeline.loop.agents import render

    def system(role: str, fmt: str) -> str:
        return render("partials/system.j2", role=role, candidate_format=fmt)

    for role in ("generator", "repairer", "optimizer"):
        inline, fast = system(role, "load_inline"), system(role, "fastpath")
        assert "load_inline" in inline and "CudaModule" not in inline
        assert "CudaModule" in fast and 'extern "C"' in fast and "torch.utils.cpp_extension.load_inline" not in fast
    assert "CudaModule" not in system("planner", "fastpath")
