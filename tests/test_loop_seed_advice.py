"""Knowledge from the first step: the KB arm's seed (generator) prompt carries the KB's routes for the
operations of the reference's ``forward`` under the run's protocol; the ablation arms' seed carries none.

Real components: the bundled KB built in a temporary home (DuckDB, the vector mirror, the MiniLM embedder),
the real query behind ``KBRetriever.task_advice``, the real ``openai`` client against the local test server
(the LLM's answers); the GPU is the scripted evaluator. The task files (tests/data/seed_tasks) are not among
the KB's worked examples.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelskill.config import load_settings
from kernelskill.kb.loader import load_skills
from kernelskill.pipeline.loop import KBRetriever, Loop, LoopOptions
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import RunStore
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop import llm_settings
from tests.test_loop_helpers import ScriptedEvaluator, fenced, kernel

ROOT = Path(__file__).resolve().parents[1]
TASKS = Path(__file__).parent / "data" / "seed_tasks"
HEADER = "## What the knowledge base advises for this task's operations"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    from kernelskill.kb.home import open_store

    home = tmp_path_factory.mktemp("seed_home")
    s = load_settings(home=home)
    open_store(s).close()  # the bundled KB, built once for the module
    return s


@pytest.fixture(scope="module")
def categories() -> dict[str, str]:
    return {m.id: m.category for m in load_skills([ROOT / "kb" / "skills"]).methods}


def test_the_task_files_are_not_kb_examples() -> None:
    examples = {p.read_text() for p in (ROOT / "kb" / "skills" / "examples").rglob("*.py")}
    assert not any(t.read_text() in examples for t in TASKS.glob("*.py"))


@pytest.mark.parametrize(("task", "families"), [
    ("mlp_layernorm_task.py", ["GEMM", "normalization", "elementwise"]),
    ("log_softmax_task.py", ["softmax"]),
    ("cumsum_task.py", ["scan"]),
    ("conv_relu_task.py", ["conv", "elementwise"]),
    ("swish_task.py", ["elementwise"]),
])
def test_advice_names_the_forward_operation_families(settings, task: str, families: list[str]) -> None:
    advice = KBRetriever(settings).task_advice(TASKS / task, protocol="strict")
    assert [f.family for f in advice.families] == families
    assert advice.families[0].evidence.startswith(task) or families == ["elementwise"]
    top = advice.families[0]
    assert top.routes, f"{task}: no route for its dominant operation"
    assert all(r.guidance for r in top.routes)  # guidance whole, for every route shown


def test_a_reference_without_a_kernel_is_answered_for_its_operation(settings) -> None:
    """log_softmax alone (no kernel yet): the softmax family's routes, not the fallback meant for kernels that
    reduce through global atomics."""
    advice = KBRetriever(settings).task_advice(TASKS / "log_softmax_task.py", protocol="strict")
    ids = [r.method_id for r in advice.families[0].routes]
    assert advice.families[0].family == "softmax" and ids
    assert not [i for i in ids if "atomic" in i]


def test_the_protocol_decides_the_routes(settings, categories) -> None:
    """A GEMM under kernelbench (libraries allowed) is offered a library route first; under strict none."""
    task = TASKS / "mlp_layernorm_task.py"
    strict = KBRetriever(settings).task_advice(task, protocol="strict")
    bench = KBRetriever(settings).task_advice(task, protocol="kernelbench")
    assert (strict.protocol, bench.protocol) == ("strict", "kernelbench")
    assert not [r for r in strict.families[0].routes if categories.get(r.method_id) == "library"]
    assert categories.get(bench.families[0].routes[0].method_id) == "library"
    measured = [r for r in strict.families[0].routes if r.effect]
    assert measured and all("over its own 'before'" in r.effect for r in measured)
    # every family gets its own routes, never another family's
    norm = strict.families[1]
    assert norm.family == "normalization" and norm.routes
    assert not {r.method_id for r in norm.routes} & {r.method_id for r in strict.families[0].routes}


def _seed_prompt(tmp_path: Path, settings, knowledge: str, task: Path) -> tuple[str, object]:
    options = LoopOptions(rounds=0, knowledge=knowledge)
    run = RunStore(tmp_path / knowledge / "runs").create(task, {"model": "test-model",
                                                                "options": options.model_dump()})
    with ScriptedOpenAI({"r00.generate.1": [fenced(kernel("speedup=1.00", "seed"))]}) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), ScriptedEvaluator(),
                      KBRetriever(settings), options).execute()
    assert result.status == "finished"
    call = run.log.find("r00.generate.1", "llm_call")["data"]
    return call["messages"][-1]["content"], run


def test_the_seed_prompt_differs_between_the_arms(tmp_path: Path, settings) -> None:
    task = TASKS / "mlp_layernorm_task.py"
    with_kb, run = _seed_prompt(tmp_path, settings, "kb", task)
    assert HEADER in with_kb and "### GEMM (task.py: Model.forward calls linear (line 14))" in with_kb
    advice = run.log.find("advice.task", "task_advice")["data"]["advice"]  # recorded once, a kb step
    for route in advice["families"][0]["routes"]:
        assert f"`{route['method_id']}`" in with_kb and route["guidance"] in with_kb
    kinds = [e["kind"] for e in run.log.events if e["step"] == "advice.task"]
    assert kinds == ["kb"]

    without, none_run = _seed_prompt(tmp_path, settings, "none", task)
    profile, _ = _seed_prompt(tmp_path, settings, "profile", task)
    assert HEADER not in without and without == profile  # neither ablation arm gets KB content at round 0
    assert none_run.log.find("advice.task", "task_advice") is None
    # the none arm's seed is exactly the KB arm's without the advice section
    start = with_kb.index(HEADER)
    end = with_kb.index("## What has been tried on this task")
    def squeeze(text: str) -> str:
        return re.sub(r"\n{3,}", "\n\n", text)

    assert squeeze(with_kb[:start] + with_kb[end:]) == squeeze(without)


def test_a_resumed_run_reads_the_advice_back(tmp_path: Path, settings) -> None:
    task = TASKS / "swish_task.py"
    _, run = _seed_prompt(tmp_path, settings, "kb", task)

    class Counting(KBRetriever):
        asked = 0

        def task_advice(self, task, protocol=None, precision=None):  # type: ignore[no-untyped-def]
            Counting.asked += 1
            return super().task_advice(task, protocol)

    options = LoopOptions(rounds=0)
    with ScriptedOpenAI({}) as server:
        again = Loop(RunStore(run.path.parent).open(run.id), LLMClient.from_settings(llm_settings(server.base_url)),
                     ScriptedEvaluator(), Counting(settings), options).execute()
        assert server.steps() == []
    assert again.status == "finished" and Counting.asked == 0


def test_a_convolution_task_gets_the_compensated_library_route_where_cudnn_is_allowed(settings) -> None:
    """Eager runs cuDNN in TF32 while the check keeps fp32: under kernelbench the seed is pointed at the
    error-compensated split through cuDNN first; under strict (no libraries) at the compensated implicit GEMM."""
    task = TASKS / "conv_relu_task.py"
    bench = KBRetriever(settings).task_advice(task, protocol="kernelbench").families[0]
    strict = KBRetriever(settings).task_advice(task, protocol="strict").families[0]
    assert bench.family == strict.family == "conv"
    assert bench.routes[0].method_id == "ec_tf32_library_conv"
    assert strict.routes[0].method_id == "ec_tf32_implicit_gemm_conv"
    assert not [r for r in strict.routes if r.method_id in ("ec_tf32_library_conv", "cudnn_conv")]
