"""The ablation arm (``knowledge: none``): the same loop, model and budget, but no profile, no query and no
retrieved knowledge; the planner names any technique and only the shape of its answer is checked.

The real ``openai`` client talks to the local test server (the LLM's answers); the GPU is the scripted
evaluator. The KB arm's planner prompt of the same task is rendered for contrast, so the test shows what the
ablation takes away.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.kb.loader import load_skills
from kernelskill.pipeline.loop import Loop, LoopOptions
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import Run, RunStore
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop import llm_settings
from tests.test_loop_helpers import TASK, ScriptedEvaluator, StandInRetriever, fenced, kernel, review

ROOT = Path(__file__).resolve().parents[1]
FREE_METHOD = "fused_relu_scale_float4"  # a name no permitted list holds


def free_plan(method: str = FREE_METHOD) -> str:
    return json.dumps({"method": method, "rationale": "one pass, wide loads", "plan": "float4 loads, one kernel"})


SCRIPT = {
    "r00.generate.1": [fenced(kernel("speedup=1.10", "seed"))],
    "r01.plan.1": [free_plan()],
    "r01.optimize.1": [fenced(kernel("speedup=1.70", "free"))],
    "r01.review.1": [review(True)],
    "r02.plan.1": ["I am not sure."],  # no JSON: re-asked with the reason, like any planner answer
    "r02.plan.2": [free_plan("persistent_grid")],
    "r02.optimize.1": [fenced(kernel("status=mismatch", "persist"))],
}


def kb_words() -> list[str]:
    """What only the KB could have put in a prompt: method ids and names, case and bottleneck ids."""
    skills = load_skills([ROOT / "kb" / "skills"])
    words = [m.id for m in skills.methods] + [m.name for m in skills.methods]
    return words + [c.id for c in skills.cases] + [b.id for b in skills.bottlenecks]


def arm_run(tmp_path: Path, knowledge: str, *, rounds: int) -> tuple[Run, LoopOptions]:
    """A fresh run of the ReLU task for one ablation arm (no repairs), and its options."""
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=rounds, knowledge=knowledge, max_repairs=0)
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model",
                                                    "options": options.model_dump(exclude={"stop_before"})})
    return run, options


def test_knowledge_none_plans_freely_with_no_kb_content(tmp_path: Path) -> None:
    run, options = arm_run(tmp_path, "none", rounds=2)
    evaluator, retriever = ScriptedEvaluator(), StandInRetriever()
    with ScriptedOpenAI(SCRIPT) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), evaluator, retriever,
                      options).execute()
        assert sorted(set(server.steps())) == sorted(SCRIPT)

    assert result.status == "finished" and result.verified
    assert result.best["method"] == FREE_METHOD and result.best["speedup"] == pytest.approx(1.70)
    assert retriever.calls == []  # no query
    assert [k for k, _ in evaluator.calls].count("profile") == 0  # no profile either

    calls = {e["step"]: e["data"] for e in run.log.of_type("llm_call")}
    for step in ("r01.plan.1", "r02.plan.1", "r02.plan.2"):
        prompt = calls[step]["messages"][-1]["content"]
        assert "Permitted methods" not in prompt and "knowledge base" not in prompt.lower()
        assert "measured" not in prompt and "worked example" not in prompt
        leaked = [w for w in kb_words() if w in prompt]
        assert leaked == [], f"{step} carries KB content: {leaked}"
    assert "Your previous answer was rejected" in calls["r02.plan.2"]["messages"][-1]["content"]
    # the writer gets the free plan, not a KB method's guidance or example
    writer = calls["r01.optimize.1"]["messages"][-1]["content"]
    assert f"`{FREE_METHOD}`" in writer and "float4 loads, one kernel" in writer and "worked example" not in writer

    plans = {e["step"]: e["data"] for e in run.log.of_type("plan")}
    assert plans["r01.plan"]["knowledge"] == "none" and plans["r01.plan"]["offered"] == []
    assert plans["r02.plan"]["method"] == "persistent_grid" and plans["r02.plan"]["asks"] == 2
    assert not plans["r02.plan"]["fallback"]
    assert run.manifest["options"]["knowledge"] == "none"
    report = (run.path / "report.md").read_text()
    assert "knowledge: **none**" in report and f"| 1 | optimize | {FREE_METHOD} |" in report


def test_optimize_cli_passes_knowledge_none_to_the_manifest(tmp_path: Path) -> None:
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    helpers = ROOT / "tests" / "test_loop_helpers.py"
    home = tmp_path / "home"
    env = {"OPENAI_API_KEY": "sk-test", "KERNELSKILL_LLM_TIMEOUT_S": "5", "KERNELSKILL_LLM_MODEL": "test-model"}
    script = {k: v for k, v in SCRIPT.items() if k.startswith(("r00", "r01"))}
    with ScriptedOpenAI(script) as server:
        result = CliRunner().invoke(main, [
            "optimize", str(task), "--rounds", "1", "--knowledge", "none", "--home", str(home),
            "--base-url", server.base_url, "--evaluator", f"{helpers}:ScriptedEvaluator", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["best"]["method"] == FREE_METHOD
    run = next((home / "runs").iterdir())
    assert json.loads((run / "run.json").read_text())["options"]["knowledge"] == "none"
    assert not (home / "kb").exists()  # the KB was never opened


def test_the_knowledge_setting_is_one_field_of_loop_settings_and_options(tmp_path: Path) -> None:
    from kernelskill.config import LoopSettings, load_settings

    (tmp_path / "kernelskill.toml").write_text('[loop]\nknowledge = "none"\nrounds = 4\n')
    settings = load_settings(home=tmp_path)
    assert settings.loop.knowledge == "none"
    options = LoopOptions.from_settings(settings.loop, rounds=None, knowledge=None, stop_before=["gpu"])
    assert (options.knowledge, options.rounds, options.stop_before) == ("none", 4, ["gpu"])
    assert LoopOptions.from_settings(settings.loop, knowledge="kb").knowledge == "kb"
    assert set(LoopSettings.model_fields) == set(LoopOptions.model_fields) - {"stop_before"}
    with pytest.raises(ValueError):
        LoopOptions(knowledge="some")
