"""Triton candidates on CPU: the prompts of the ``triton`` format, the parsing and validation of a Triton answer,
the Triton notes of the knowledge base, the 18 features read from Triton sources, and the loop walking seed,
repair and optimization with Triton answers (the real openai client against the local test server, the
scripted evaluator at the GPU boundary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelskill.config import LLMSettings
from kernelskill.feature_rules import extract_file
from kernelskill.pipeline.harness.api import build
from kernelskill.pipeline.harness.failures import classify_exception
from kernelskill.pipeline.harness.loader import inspect_candidate
from kernelskill.pipeline.harness.results import EvalConfig
from kernelskill.pipeline.loop import Loop, LoopOptions
from kernelskill.pipeline.loop.agents import check_answer, code_expects, extract_code, messages_for
from kernelskill.pipeline.loop.formats import TRITON_NOTES, format_notes
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import RunStore
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import (
    TASK,
    ScriptedEvaluator,
    StandInRetriever,
    fenced,
    kernel,
    planner_answer,
    review,
)
from tests.test_loop_triton_gpu import FUSED, SEED, UNFUSED

HERE = Path(__file__).parent
TRITON_DIR = HERE / "data" / "triton"
GPU = {"name": "NVIDIA H200", "arch": "sm_90", "notes": ""}
MEMORY = {"attempts": [], "repairs": [], "total_attempts": 0}
CODE_ROLES = {
    "generator": {"task_source": TASK, "memory": MEMORY},
    "repairer": {"task_source": TASK, "kernel_source": SEED, "memory": MEMORY,
                 "failure": {"status": "compile_error", "message": "tl.lod", "build_log": ""},
                 "diagnosis": {"root_cause": "tl.lod does not exist", "fix": "tl.load"}},
    "optimizer": {"task_source": TASK, "kernel_source": UNFUSED, "memory": MEMORY,
                  "method": {"id": "tensor_core_mma", "name": "Tensor cores", "guidance": "Use WMMA fragments."},
                  "plan": {"plan": "use the tensor cores"}},
}


def _text(role: str, fmt: str, **extra: Any) -> str:
    messages = messages_for(role, candidate_format=fmt, gpu=GPU, **(CODE_ROLES[role] | extra))
    return "\n".join(m["content"] for m in messages)


@pytest.mark.parametrize("role", sorted(CODE_ROLES))
def test_triton_prompts_ask_for_triton_kernels(role: str) -> None:
    text = _text(role, "triton")
    assert "@triton.jit" in text and "ModelNew" in text and "kernel[grid](...)" in text
    assert 'input_precision="ieee"' in text  # the strict protocol's rule for tl.dot on fp32
    assert "@triton.autotune" in text and "tl.constexpr" in text
    assert "build its CUDA code with" not in text  # the CUDA build instructions are not given
    cuda = _text(role, "load_inline")
    assert "Candidate format: Triton" not in cuda and "build its CUDA code with" in cuda


def test_a_protocol_that_allows_tf32_is_not_told_ieee() -> None:
    text = _text("generator", "triton", protocol={"allow_tf32": True})
    assert "accepts TF32" in text and 'input_precision="ieee"' not in text


def test_the_optimizer_gets_the_methods_triton_note() -> None:
    notes = format_notes("triton")
    text = _text("optimizer", "triton")
    assert "written for CUDA; in Triton: " + notes["tensor_core_mma"] in text
    assert "in Triton:" not in _text("optimizer", "load_inline")
    plain = _text("optimizer", "triton", method={"id": "algebraic_simplification", "name": "Simplify",
                                                 "guidance": "Collapse sums."})
    assert "in Triton:" not in plain  # a method whose guidance carries over has no note
    assert "still written in Triton" in _text("repairer", "triton")
    assert "Write a first Triton implementation" in _text("generator", "triton")


def test_every_triton_note_names_a_bundled_method() -> None:
    ids = set()
    for path in (HERE.parent / "kb" / "skills" / "methods").glob("*.yaml"):
        ids |= {m["id"] for m in yaml.safe_load(path.read_text())["methods"]}
    notes = format_notes("triton")
    assert notes and set(notes) <= ids, sorted(set(notes) - ids)
    assert format_notes("load_inline") == {} and TRITON_NOTES.is_file()
    for method in ("tensor_core_mma", "flash_attention_tiling", "implicit_gemm_conv"):
        assert 'input_precision="ieee"' in notes[method]


def test_parsing_and_validating_a_triton_answer() -> None:
    code, reason = extract_code(fenced(FUSED), "triton")
    assert reason == "" and code is not None and "@triton.autotune" in code
    cuda = fenced(kernel("speedup=1.0"))
    assert extract_code(cuda, "load_inline")[0] is not None
    code, reason = extract_code(cuda, "triton")
    assert code is None and "at least one @triton.jit kernel" in reason
    bare = "import torch\nimport triton\n\n@triton.jit(do_not_specialize=['n'])\ndef k(x, n):\n    pass\n\n" \
           "class ModelNew(torch.nn.Module):\n    pass\n"
    assert extract_code(fenced(bare), "triton")[1] == ""
    assert extract_code(fenced("class ModelNew(:\n"), "triton")[1].startswith("the code does not parse")
    # answers through files (`runs answer`) are checked by the same rule
    expects = code_expects("triton")
    assert expects["format"] == "triton" and "format" not in code_expects("load_inline")
    assert "@triton.jit" in check_answer(expects, cuda)
    assert check_answer(expects, fenced(SEED)) == ""  # it parses; that tl.lod fails is the harness's to find


def test_the_harness_takes_a_triton_file_and_classifies_triton_compile_errors(tmp_path: Path) -> None:
    path = tmp_path / "cand.py"
    path.write_text(FUSED)
    assert inspect_candidate(path)[2] == "python"
    built = build(path, EvalConfig(cache_dir=str(tmp_path / "builds")))
    assert built.ok and "nothing to build" in built.message  # Triton compiles in the GPU worker, at first launch

    class CompilationError(Exception):  # the name Triton's compiler raises with
        pass

    status, message, sticky, log = classify_exception(CompilationError("at 6:8: tl.lod is not defined"))
    assert status == "compile_error" and not sticky and "tl.lod" in message


def test_features_of_triton_sources(tmp_path: Path) -> None:
    softmax = extract_file(TRITON_DIR / "softmax_triton.py").values
    assert softmax["kernel_structure_id"] == 3 and softmax["uses_transcendentals"]
    assert softmax["has_bounds_check"] and not softmax["is_pointwise"] and not softmax["tc_eligible"]
    matmul = extract_file(TRITON_DIR / "matmul_triton.py").values
    assert matmul["kernel_structure_id"] == 1 and matmul["tc_eligible"] and matmul["is_gemm_kloop"]
    assert matmul["has_k_loop"] and not matmul["is_naive_gemm"] and matmul["has_bounds_check"]
    (tmp_path / "fused.py").write_text(FUSED)
    (tmp_path / "unfused.py").write_text(UNFUSED)
    fused = extract_file(tmp_path / "fused.py").values
    assert fused["is_pointwise"] and fused["streaming_no_reuse"] and not fused["has_multiple_kernels_in_forward"]
    unfused = extract_file(tmp_path / "unfused.py").values
    assert unfused["has_multiple_kernels_in_forward"] and unfused["is_pointwise"]


def test_loop_with_triton_answers(tmp_path: Path) -> None:
    """Seed (a CUDA answer is refused for the triton format, the Triton one fails to compile), repair,
    one optimization; every code prompt asks for Triton, the optimizer's carries the method's Triton note."""
    seen: dict[str, list[dict[str, str]]] = {}

    def answer(text: str) -> Any:
        def reply(step: str, role: str, body: dict[str, Any]) -> str:
            seen[step] = body["messages"]
            return text
        return reply

    script = {
        "r00.generate.1": [answer(fenced(kernel("speedup=9.0", "cuda")))],
        "r00.generate.2": [answer(fenced("# harness: status=compile_error\n" + SEED))],
        "r01.diagnose.1": ['{"error_class": "compile_error", "root_cause": "tl.lod", "fix": "tl.load"}'],
        "r01.repair.1": [answer(fenced("# harness: speedup=0.98\n" + UNFUSED))],
        "r02.plan.1": [planner_answer("kernel_fusion", "one autotuned kernel")],
        "r02.optimize.1": [answer(fenced("# harness: speedup=2.90\n" + FUSED))],
        "r02.review.1": [review(True)],
    }
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=2, verify_candidates=1, candidate_format="triton")
    run = RunStore(tmp_path / "runs").create(task, {"model": "test-model", "options": options.model_dump()})
    with ScriptedOpenAI(script) as server:
        llm = LLMClient.from_settings(LLMSettings(base_url=server.base_url, api_key="sk-test", model="test-model",
                                                  backoff_s=0.01))
        result = Loop(run, llm, ScriptedEvaluator(), StandInRetriever(), options).execute()
        assert sorted(server.steps()) == sorted(script)

    assert result.status == "finished" and result.best["candidate"] == "candidates/r02.optimize.py"
    assert result.best["speedup"] == pytest.approx(2.90)
    assert "at least one @triton.jit kernel" in seen["r00.generate.2"][-1]["content"]  # the refusal, re-asked
    for step in ("r00.generate.1", "r01.repair.1", "r02.optimize.1"):
        assert "## Candidate format: Triton" in seen[step][0]["content"], step
    assert "in Triton: " + format_notes("triton")["kernel_fusion"] in seen["r02.optimize.1"][-1]["content"]
    assert "@triton.jit" in (run.path / "best.py").read_text()
