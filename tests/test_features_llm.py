"""LLM fallback: only undecided features, never overrules a rule, one retry, DuckDB cache, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.feature_rules import FeatureCache, extract

# A __shared__ array used as per-thread scratch with no reduction: not pointwise, no category -> undecided.
UNDECIDED = '''
__global__ void scratch_kernel(const float* x, float* y, int n) {
    __shared__ float scratch[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    scratch[threadIdx.x] = x[i] * 3.0f;
    y[i] = scratch[threadIdx.x] + 1.0f;
}
void launch(const float* x, float* y, int n) { scratch_kernel<<<n / 256, 256>>>(x, y, n); }
'''


class ScriptedLLM:
    """The LLM boundary: answers scripted in advance, prompts recorded."""

    def __init__(self, answers: list[Any], model: str = "scripted-1") -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []
        self.schemas: list[dict] = []
        self.model = model

    def complete_json(self, role: str, prompt: str, schema: dict) -> dict:
        assert role == "feature_fallback"
        self.prompts.append(prompt)
        self.schemas.append(schema)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_rules_leave_structure_undecided_without_llm() -> None:
    fs = extract(UNDECIDED, path="k.cu")
    assert fs.undecided() == ["kernel_structure_id"]
    assert fs.values["kernel_structure_id"] == 0 and fs.llm_model is None


def test_fallback_fills_only_undecided_and_is_cached(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path / "cache" / "features.duckdb")
    llm = ScriptedLLM([{"kernel_structure_id": 1, "has_shared_memory_tile": False,
                        "reasons": {"kernel_structure_id": "scratch tile"}}])
    fs = extract(UNDECIDED, path="k.cu", llm=llm, cache=cache)
    assert fs.values["kernel_structure_id"] == 1
    assert fs.values["has_shared_memory_tile"] is True  # decided by a rule: the LLM cannot overrule it
    assert fs.evidence["kernel_structure_id"][0].rule == "llm" and fs.llm_model == "scripted-1"
    assert list(llm.schemas[0]["properties"]) == ["kernel_structure_id", "reasons"]
    assert "kernel_structure_id" in llm.prompts[0] and "scratch_kernel" in llm.prompts[0]
    assert cache.count() == 1
    # next round: same source, same rules, same model -> from the DuckDB file, no call at all
    again = extract(UNDECIDED, path="k.cu", llm=ScriptedLLM([]), cache=str(cache.path))
    assert again.values == fs.values
    # another model is another key
    other = ScriptedLLM([{"kernel_structure_id": 3}], model="other")
    assert extract(UNDECIDED, path="k.cu", llm=other, cache=cache).values["kernel_structure_id"] == 3
    assert cache.count() == 2


def test_one_retry_then_rule_default(tmp_path: Path) -> None:
    llm = ScriptedLLM([{"kernel_structure_id": 9}, {"kernel_structure_id": 2}])
    fs = extract(UNDECIDED, path="k.cu", llm=llm)
    assert fs.values["kernel_structure_id"] == 2 and len(llm.prompts) == 2
    assert "invalid" in llm.prompts[1]
    bad = ScriptedLLM([{"kernel_structure_id": "x"}, {"nothing": 1}])
    cache = FeatureCache(tmp_path / "c.duckdb")
    fs2 = extract(UNDECIDED, path="k.cu", llm=bad, cache=cache)
    assert fs2.values["kernel_structure_id"] == 0 and fs2.llm_model is None
    assert cache.count() == 0


def test_decided_sources_never_call_the_llm() -> None:
    llm = ScriptedLLM([])
    fs = extract(UNDECIDED.replace("__shared__ float scratch[256];", "float scratch[256];")
                 .replace("scratch[threadIdx.x]", "scratch[0]"), path="k.cu", llm=llm)
    assert not fs.undecided() and llm.prompts == []


def test_cli_json_and_errors(tmp_path: Path) -> None:
    kernel = tmp_path / "k.cu"
    kernel.write_text(UNDECIDED)
    runner = CliRunner()
    res = runner.invoke(main, ["features", str(kernel), "--json", "--no-llm", "--home", str(tmp_path)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["values"]["has_shared_memory_tile"] is True and data["kernels"] == ["scratch_kernel"]
    res = runner.invoke(main, ["features", str(kernel), "--no-llm", "--home", str(tmp_path)])
    assert res.exit_code == 0 and "has_shared_memory_tile" in res.output
    res = runner.invoke(main, ["features", str(tmp_path / "nope.py"), "--no-llm", "--home", str(tmp_path)])
    assert res.exit_code == 2 and "nope.py" in res.output
