"""Golden prompts: what the model reads at each loop step for six tasks, rendered by ``kernelskill prompts
render`` (the real query over the bundled KB, real profiles of the examples), compared with the files in
``tests/golden/``. A change to the KB or to a template shows here as a diff of the prompt text.

Update after an intended change: ``KERNELSKILL_UPDATE_GOLDEN=1 python -m pytest tests/test_prompt_golden.py``,
then read the diff (``git diff tests/golden``) before committing it.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.config import load_settings

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden"
EX, DATA = "examples", "tests/data/prompts"
UPDATE = os.environ.get("KERNELSKILL_UPDATE_GOLDEN") == "1"


def example(name: str, task: str) -> list[str]:
    return [f"{EX}/tasks/{task}", "--candidate", f"{EX}/kernels/{name}.py", "--profile", f"{EX}/profiles/{name}.csv"]


GEMM_GN = [f"{DATA}/gemm_groupnorm_task.py", "--candidate", f"{DATA}/gemm_groupnorm_kernel.py"]

#: golden file -> the ``prompts render`` arguments (paths relative to the repository root)
CASES: dict[str, list[str]] = {
    "naive_gemm.plan": example("naive_gemm", "naive_gemm_task.py") + ["--step", "plan", "--speedup", "0.42"],
    "naive_gemm.write": example("naive_gemm", "naive_gemm_task.py") + ["--step", "write"],
    # a run in bf16: the contract states the cast and the bf16 tolerance, the precision vetoes are lifted
    "naive_gemm.plan.bf16": example("naive_gemm", "naive_gemm_task.py") + ["--step", "plan", "--precision", "bf16"],
    "naive_gemm.write.bf16": example("naive_gemm", "naive_gemm_task.py")
    + ["--step", "write", "--precision", "bf16", "--method", "tensor_core_mma"],
    "relu_vec4.plan": example("relu_vec4", "relu_task.py") + ["--step", "plan"],
    "relu_vec4.plan.search": example("relu_vec4", "relu_task.py") + ["--step", "plan", "--plans", "3"],
    "row_softmax.plan": example("row_softmax", "softmax_task.py") + ["--step", "plan"],
    "row_softmax.diagnose": example("row_softmax", "softmax_task.py")
    + ["--step", "diagnose", "--result", f"{DATA}/row_softmax_mismatch.json"],
    "row_sum_divergent.plan": example("row_sum_divergent", "row_sum_task.py") + ["--step", "plan"],
    "row_sum_divergent.plan.knowledge_none": example("row_sum_divergent", "row_sum_task.py")
    + ["--step", "plan", "--knowledge", "none"],
    "linear_gelu_residual.plan": example("linear_gelu_residual", "linear_gelu_residual_task.py") + ["--step", "plan"],
    "linear_gelu_residual.write": example("linear_gelu_residual", "linear_gelu_residual_task.py")
    + ["--step", "write"],
    "gemm_groupnorm.generate": [f"{DATA}/gemm_groupnorm_task.py", "--step", "generate"],
    # the seed differs between the arms: the KB arm's carries the KB's routes for the task's operations
    "gemm_groupnorm.generate.knowledge_none": [f"{DATA}/gemm_groupnorm_task.py", "--step", "generate",
                                               "--knowledge", "none"],
    "row_sum_divergent.plan.knowledge_profile": example("row_sum_divergent", "row_sum_task.py")
    + ["--step", "plan", "--knowledge", "profile"],
    "gemm_groupnorm.plan.static": GEMM_GN + ["--step", "plan"],
    "gemm_groupnorm.write.fastpath": GEMM_GN + ["--step", "write", "--format", "fastpath"],
    "gemm_groupnorm.write.triton": GEMM_GN + ["--step", "write", "--format", "triton"],
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kernelskill.kb.home import open_store

    h = tmp_path_factory.mktemp("prompts_home")
    open_store(load_settings(home=h)).close()  # the bundled KB, built once for the module
    return h


def render(home: Path, args: list[str]) -> str:
    result = CliRunner().invoke(main, ["prompts", "render", *args, "--home", str(home)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_prompt_matches_its_golden_file(name: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = render(home, CASES[name])
    assert str(ROOT) not in text and str(home) not in text  # no path of this machine
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path.name} is missing: run with KERNELSKILL_UPDATE_GOLDEN=1 to create it"
    want = path.read_text()
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), f"golden/{path.name}",
                                            "rendered", n=2))
        pytest.fail(f"the {name} prompt changed (KERNELSKILL_UPDATE_GOLDEN=1 to accept):\n{diff[:6000]}")


def test_the_render_is_deterministic(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = CASES["linear_gelu_residual.plan"]
    assert render(home, args) == render(home, args)
