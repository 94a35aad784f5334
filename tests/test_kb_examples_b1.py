"""The first 22 curated methods: their YAML validates and their worked examples are well formed.

CPU tests parse the example files with ``ast`` (nothing is built or imported); the ``gpu`` test builds
every before/after with ``load_inline`` and checks it against the task's ``Model`` on CUDA.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from tests import kb_examples_check as RUNNER
from tests.example_files import (
    CONTRACT_TAGS,
    init_params,
    load_inline_kwargs,
    load_method,
    module_strings,
    top_names,
)

SKILLS = Path(__file__).resolve().parents[1] / "kb" / "skills"


METHODS: tuple[str, ...] = RUNNER.B1_METHODS


def test_all_22_methods_are_listed_once() -> None:
    assert len(METHODS) == 22 and len(set(METHODS)) == 22
    contracts = (Path(__file__).resolve().parents[1] / "docs" / "CONTRACTS.md").read_text()
    block = contracts.split("## Method ids", 1)[1].split("\n", 1)[1].split("\n\n", 1)[0]
    curated = [m.strip() for m in block.replace("\n", " ").split(",") if m.strip()]
    assert list(METHODS) == curated[:22]


@pytest.mark.parametrize("mid", METHODS)
def test_method_yaml_validates(mid: str) -> None:
    m = load_method(mid)
    assert m.id == mid
    assert m.preconditions.strip() and m.guidance.strip() and m.intent.strip() and m.mechanism.strip()
    assert m.expected_effects, f"{mid}: expected_effects is empty"
    assert m.risks and m.pitfalls and m.bottlenecks and m.structures
    assert m.example is not None
    for rel in (m.example.task, m.example.before, m.example.after):
        assert rel.startswith(f"examples/{mid}/"), rel
        assert (SKILLS / rel).is_file(), rel


@pytest.mark.parametrize("mid", METHODS)
def test_method_tags_follow_the_contract(mid: str) -> None:
    m = load_method(mid)
    tags = set(m.tags)
    expected = {
        "vectorized_access_16b": {"vectorization"},
        "cp_async_double_buffering": {"async_copy"},
        "tma_bulk_copy": {"async_copy", "hopper_only"},
        "tensor_core_mma": {"tensor_core", "precision"},
        "wgmma_hopper": {"tensor_core", "hopper_only", "precision"},
        "cublas_gemm": {"library"},
        "shared_memory_tiling": {"caching"},
        "register_blocking": {"caching"},
    }.get(mid, set())
    assert expected <= tags, f"{mid}: missing contract tags {expected - tags}"
    if mid not in {"tma_bulk_copy", "wgmma_hopper"}:
        assert "hopper_only" not in tags
    if mid != "cublas_gemm":
        assert "library" not in tags
    contract_tags = tags & CONTRACT_TAGS
    if "precision" in contract_tags:
        assert "tensor_core" in contract_tags, f"{mid}: only the tensor-core methods change precision here"


@pytest.mark.parametrize("mid", METHODS)
def test_method_references_exist_in_the_kb(mid: str) -> None:
    m = load_method(mid)
    fields = {f["id"] for f in yaml.safe_load((SKILLS / "fields.yaml").read_text())["fields"]}
    bottlenecks = {b["id"] for b in yaml.safe_load((SKILLS / "bottlenecks.yaml").read_text())["bottlenecks"]}
    for effect in m.expected_effects:
        assert effect.field in fields, f"{mid}: effect field {effect.field!r} is not in fields.yaml"
    for b in m.bottlenecks:
        assert b in bottlenecks, f"{mid}: bottleneck {b!r} is not in bottlenecks.yaml"


@pytest.mark.parametrize("mid", METHODS)
def test_task_file_is_kernelbench_format(mid: str) -> None:
    path = SKILLS / "examples" / mid / "task.py"
    names = top_names(path)
    assert {"Model", "get_inputs", "get_init_inputs"} <= names
    assert "load_inline" not in path.read_text()


@pytest.mark.parametrize("variant", ["before", "after"])
@pytest.mark.parametrize("mid", METHODS)
def test_candidate_file_shape(mid: str, variant: str) -> None:
    folder = SKILLS / "examples" / mid
    path = folder / f"{variant}.py"
    assert "ModelNew" in top_names(path)
    assert init_params(path, "ModelNew") == init_params(folder / "task.py", "Model")
    strings = module_strings(path)
    cuda, cpp = strings.get("CUDA_SRC", ""), strings.get("CPP_SRC", "")
    assert "__global__" in cuda, f"{path}: no CUDA kernel"
    assert "torch/extension.h" not in cuda, f"{path}: heavy header in the CUDA source"
    includes = set(re.findall(r"#include\s*<([^>]+)>", cuda))
    assert includes <= {"torch/types.h", "cuda_runtime.h", "cuda_fp16.h", "mma.h", "cuda_pipeline.h", "cstdint"}
    kwargs = load_inline_kwargs(path)
    name = ast.literal_eval(kwargs["name"])
    assert name == f"ks_{mid}_{variant}"
    functions = ast.literal_eval(kwargs["functions"])
    flags = ast.literal_eval(kwargs["extra_cuda_cflags"])
    assert "-O3" in flags
    arch = "90a" if (mid, variant) == ("wgmma_hopper", "after") else "90"
    assert f"-gencode=arch=compute_{arch},code=sm_{arch}" in flags
    for fn in functions:
        assert re.search(rf"\b{fn}\s*\(", cpp), f"{path}: {fn} not declared in CPP_SRC"
        assert re.search(rf"torch::Tensor\s+{fn}\s*\(", cuda), f"{path}: {fn} not defined in CUDA_SRC"


def test_example_names_are_unique() -> None:
    names = []
    for mid in METHODS:
        for variant in ("before", "after"):
            names.append(ast.literal_eval(load_inline_kwargs(SKILLS / "examples" / mid / f"{variant}.py")["name"]))
    assert len(names) == len(set(names))


@pytest.mark.gpu
def test_examples_build_and_match_model_on_cuda() -> None:
    rows = RUNNER.run_all(list(METHODS), workers=4)
    bad = [f"{r['method']}/{r['variant']}: {r['status']} {r.get('message', '')}" for r in rows if r["status"] != "ok"]
    assert not bad, "\n".join(bad)
    assert all(r["ok_1e2"] for r in rows)
