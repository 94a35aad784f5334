"""Whole guidance in every prompt, and ``kernelskill prompts render``'s contract.

Over every method of the bundled KB: its guidance reaches the planner and the writer whole (never cut, never
ending in "..."), and the writer gets its worked example's before/after code with the example's label.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.kb.loader import load_skills
from kernelskill.pipeline.loop.agents import FULL_GUIDANCE_METHODS, Agents, PlanDecision, whole_sentences
from kernelskill.pipeline.loop.examples import worked_example
from kernelskill.pipeline.loop.memory import Memory
from tests.test_loop_helpers import TASK, kernel

ROOT = Path(__file__).resolve().parents[1]
SKILLS = ROOT / "kb" / "skills"
CUT = re.compile(r"(\.\.\.|\u2026)\s*$", re.M)  # a line that ends in an ellipsis


@pytest.fixture(scope="module")
def methods() -> list[dict]:
    """Every bundled method as the loop's query view carries it (guidance, measured, worked example)."""
    task = ROOT / "examples" / "tasks" / "naive_gemm_task.py"
    out = []
    for m in load_skills([SKILLS]).methods:
        paths = [str(SKILLS / p) for p in (m.example.task, m.example.before, m.example.after)] if m.example else []
        e = m.latest_measurement()
        measured = {"speedup": e.speedup, "verdict": e.verdict, "hardware": e.hardware} if e else ""
        out.append({"id": m.id, "name": m.name, "guidance": m.guidance, "measured": measured,
                    "example": worked_example(paths, task) if paths else ""})
    return out


def plan_prompt(permitted: list[dict]) -> str:
    query = {"tier": "M", "bottleneck": "b", "static_only": False, "case": None, "forbidden": []}
    return Agents(None).plan_messages(task_source=TASK, kernel_source=kernel("speedup=1.0"), parent_speedup=1.0,
                                      query=query, permitted=permitted, filtered={},
                                      memory=Memory().view())[1]["content"]


def test_every_methods_guidance_is_whole_in_the_planner(methods: list[dict]) -> None:
    assert len(methods) >= 45
    for start in range(0, len(methods), FULL_GUIDANCE_METHODS):
        shown = methods[start:start + FULL_GUIDANCE_METHODS]
        prompt = plan_prompt(shown)
        for m in shown:
            assert " ".join(m["guidance"].split()) in " ".join(prompt.split()), m["id"]
        assert not CUT.search(prompt), CUT.search(prompt)


def test_beyond_the_limit_methods_are_named_never_cut(methods: list[dict]) -> None:
    prompt = plan_prompt(methods)
    for i, m in enumerate(methods):
        assert f"{i + 1}. `{m['id']}`" in prompt
        whole = " ".join(m["guidance"].split()) in " ".join(prompt.split())
        assert whole == (i < FULL_GUIDANCE_METHODS), m["id"]  # in full, or not at all
    assert not CUT.search(prompt)


def test_every_writer_prompt_has_the_whole_guidance_and_the_worked_example(methods: list[dict]) -> None:
    agents = Agents(None)
    for m in methods:
        prompt = agents.optimize_messages(task_source=TASK, kernel_source=kernel("speedup=1.0"), method=m,
                                          plan=PlanDecision(method=m["id"], plan="the plan"),
                                          memory=Memory().view())[1]["content"]
        assert m["guidance"].strip() in prompt, m["id"]
        assert not CUT.search(prompt), (m["id"], CUT.search(prompt))
        example = m["example"]
        assert example, f"{m['id']} has no readable worked example"
        assert example["before"].strip() in prompt and example["after"].strip() in prompt, m["id"]
        assert f"## Its worked example: {example['label']}" in prompt and example["label"], m["id"]


def test_whole_sentences_never_cuts_a_sentence() -> None:
    text = "First sentence here. Second one is longer than the rest of them. Third."
    assert whole_sentences(text, 200) == text
    short = whole_sentences(text, 30)
    assert short == "First sentence here. (2 more sentences not shown)"
    assert whole_sentences("One very long sentence " * 20, 10).startswith("One very long sentence One")
    assert not whole_sentences(text, 30).endswith("...")


# prompts render ---------------------------------------------------------------------------------------
def test_render_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    task = ROOT / "examples" / "tasks" / "relu_task.py"
    for args, said in (
        ([str(task), "--step", "plan"], "give --candidate FILE"),
        ([str(tmp_path / "none.py")], "task file not found"),
        ([str(task), "--candidate", str(tmp_path / "k.py"), "--step", "write"], "candidate file not found"),
    ):
        result = runner.invoke(main, ["prompts", "render", *args, "--home", str(tmp_path / "home")])
        assert result.exit_code == 2, result.output
        assert said in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_render_of_a_harness_failure_says_the_loop_does_not_diagnose_it(tmp_path: Path) -> None:
    data = ROOT / "tests" / "data" / "prompts"
    result = CliRunner().invoke(main, [
        "prompts", "render", str(data / "gemm_groupnorm_task.py"), "--candidate", str(data / "gemm_groupnorm_kernel.py"),
        "--step", "diagnose", "--result", str(data / "gemm_groupnorm_timeout.json"), "--home", str(tmp_path)])
    assert result.exit_code == 2
    assert "timeout in the harness's own alt_shapes stage is the harness's failure" in result.output


def test_render_json_gives_the_messages_and_the_answer_shape(tmp_path: Path) -> None:
    import json

    task = ROOT / "examples" / "tasks" / "relu_task.py"
    result = CliRunner().invoke(main, ["prompts", "render", str(task), "--candidate",
                                       str(ROOT / "examples" / "kernels" / "relu_vec4.py"), "--knowledge", "none",
                                       "--json", "--home", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["role"] == "planner" and [m["role"] for m in data["messages"]] == ["system", "user"]
    assert "method_in" not in data["expects"]  # the free planner's answer is checked for shape only
    assert not (tmp_path / "kb").exists()  # knowledge none opens no KB
