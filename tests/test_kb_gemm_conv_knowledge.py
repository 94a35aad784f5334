"""The fp32 GEMM/convolution knowledge: five methods with worked examples, their tags under the vetoes, the
protocol coverage of the linter, and the conv dead end of a strict protocol through a real query.

CPU only: the examples are parsed (nothing is built); the query runs against a real store (DuckDB file,
Chroma collection, bundled embedding model) built from the bundled skills.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from kernelskill.config import load_settings
from kernelskill.kb.lint import MIN_PERMITTED, lint
from kernelskill.kb.loader import load_report, load_skills
from kernelskill.protocols import PRESETS
from kernelskill.retrieval.api import query
from tests.example_files import init_params, load_inline_kwargs, load_method, module_strings, top_names

ROOT = Path(__file__).resolve().parents[1]
SKILLS = ROOT / "kb" / "skills"
DATA = Path(__file__).parent / "data" / "gemm_conv_dead_end"
NEW = ("ec_tf32_gemm", "ec_tf32_implicit_gemm_conv", "warp_tiling_fp32_gemm", "winograd_conv3x3",
       "library_gemm_epilogue_fusion")


# ------------------------------------------------------------------------------------------ the methods


@pytest.mark.parametrize("mid", NEW)
def test_method_is_complete(mid: str) -> None:
    m = load_method(mid)
    assert m.id == mid and m.example is not None
    for text in (m.intent, m.mechanism, m.preconditions, m.guidance):
        assert len(text.split()) >= 40 or text is m.intent, f"{mid}: prose too thin"
        assert "..." not in text and "\u2026" not in text, f"{mid}: elided text"
        assert text.rstrip().endswith((".", ")")), f"{mid}: text does not end a sentence"
    assert m.expected_effects and m.risks and m.pitfalls and m.forbidden_patterns and m.bottlenecks
    for rel in (m.example.task, m.example.before, m.example.after):
        assert rel == f"examples/{mid}/{Path(rel).name}" and (SKILLS / rel).is_file(), rel


def test_tags_keep_the_compensated_methods_under_the_strict_precision_veto() -> None:
    tags = {mid: set(load_method(mid).tags) for mid in NEW}
    for mid in ("ec_tf32_gemm", "ec_tf32_implicit_gemm_conv"):
        assert "tensor_core" in tags[mid] and "precision" not in tags[mid] and "library" not in tags[mid]
    assert "library" in tags["library_gemm_epilogue_fusion"]
    for mid in ("warp_tiling_fp32_gemm", "winograd_conv3x3"):
        assert not tags[mid] & {"tensor_core", "precision", "library"}
    vetoes = {v["id"]: v for v in yaml.safe_load((SKILLS / "vetoes.yaml").read_text())["vetoes"]}
    assert vetoes["no_precision_downcast_fp32"]["tags"] == ["precision"]
    assert vetoes["tensor_cores_need_matmul"]["tags"] == ["tensor_core"]
    assert {"ec_tf32_implicit_gemm_conv", "winograd_conv3x3"} <= set(vetoes["conv_methods_need_conv"]["methods"])


@pytest.mark.parametrize("variant", ["before", "after"])
@pytest.mark.parametrize("mid", NEW)
def test_example_files_are_kernelbench_candidates(mid: str, variant: str) -> None:
    folder = SKILLS / "examples" / mid
    assert {"Model", "get_inputs", "get_init_inputs"} <= top_names(folder / "task.py")
    path = folder / f"{variant}.py"
    assert "ModelNew" in top_names(path)
    assert init_params(path, "ModelNew") == init_params(folder / "task.py", "Model")
    strings = module_strings(path)
    cuda, cpp = strings["CUDA_SRC"], strings["CPP_SRC"]
    assert "__global__" in cuda
    assert set(re.findall(r"#include\s*<([^>]+)>", cuda)) == {"torch/types.h", "cuda_runtime.h"}
    kwargs = load_inline_kwargs(path)
    assert ast.literal_eval(kwargs["name"]) == f"kb_{mid}_{variant}"
    assert ast.literal_eval(kwargs["extra_cuda_cflags"])[:2] == ["-O3", "-gencode=arch=compute_90,code=sm_90"]
    for fn in ast.literal_eval(kwargs["functions"]):
        assert re.search(rf"\b{fn}\s*\(", cpp) and re.search(rf"\b{fn}\s*\([^)]*\)\s*\{{", cuda), fn


def test_compensated_examples_split_and_pass_the_candidate_patterns() -> None:
    vetoes = yaml.safe_load((SKILLS / "vetoes.yaml").read_text())["vetoes"]
    patterns = [p for v in vetoes if "candidate" in v.get("scope", []) for p in v.get("patterns", [])
                if v["id"] != "no_reference_op_for_main_computation"]
    for mid in ("ec_tf32_gemm", "ec_tf32_implicit_gemm_conv"):
        after = (SKILLS / "examples" / mid / "after.py").read_text()
        assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in after
        assert after.count("mma_tf32(p, ") == 3  # lo*hi, hi*lo, hi*hi into a fresh fragment per k8 step
        assert "acc[mi][ni][r] += p[r]" in after  # promoted with a rounded FADD (tensor-core sums truncate)
        assert "0xffffe000u" in after  # hi = tf32(v), lo = tf32(v - hi) by integer rounding
        hits = [p for p in patterns if re.search(p, after)]
        assert not hits, (mid, hits)



def test_library_split_method_is_complete_and_vetoed_like_cublas_and_the_compensated_gemm() -> None:
    """ec_tf32_library_gemm carries cuBLAS's ``library`` tag (removed under ``strict``) and the compensated GEMM's
    ``tensor_core`` tag (removed where there is no matmul), and no ``precision`` tag: it keeps fp32 accuracy."""
    test_method_is_complete("ec_tf32_library_gemm")  # the same completeness bar as the five before it
    tags = set(load_method("ec_tf32_library_gemm").tags)
    assert set(load_method("cublas_gemm").tags) - {"gemm"} <= tags
    assert set(load_method("ec_tf32_gemm").tags) <= tags
    assert "precision" not in tags


def test_library_split_example_stacks_along_k_and_passes_the_candidate_patterns() -> None:
    folder = SKILLS / "examples" / "ec_tf32_library_gemm"
    assert {"Model", "get_inputs", "get_init_inputs"} <= top_names(folder / "task.py")
    vetoes = yaml.safe_load((SKILLS / "vetoes.yaml").read_text())["vetoes"]
    patterns = [p for v in vetoes if "candidate" in v.get("scope", []) for p in v.get("patterns", [])]
    for variant in ("before", "after"):
        path = folder / f"{variant}.py"
        assert "ModelNew" in top_names(path)
        assert init_params(path, "ModelNew") == init_params(folder / "task.py", "Model")
        kwargs = load_inline_kwargs(path)
        assert ast.literal_eval(kwargs["name"]) == f"kb_ec_tf32_library_gemm_{variant}"
        assert ast.literal_eval(kwargs["extra_cuda_cflags"])[:2] == ["-O3", "-gencode=arch=compute_90,code=sm_90"]
    after = (folder / "after.py").read_text()
    cuda = module_strings(folder / "after.py")["CUDA_SRC"]
    assert cuda.count("cublasGemmEx(") == 1 and "CUBLAS_COMPUTE_32F_FAST_TF32" in cuda  # ONE library GEMM
    assert "at::cuda::getCurrentCUDABlasHandle()" in cuda and "at::cuda::getCurrentCUDAStream()" in cuda
    assert "0xffffe000u" in cuda and "+ 0x1000u" in cuda  # hi, lo rounded to TF32 by integer arithmetic
    assert "(int)k3" in cuda  # K' = 3K
    assert ast.literal_eval(load_inline_kwargs(folder / "after.py")["extra_ldflags"]) == ["-lcublas"]
    hits = [p for p in patterns if re.search(p, after)]
    assert not hits, hits  # no plain-TF32 switch, no output cache, no torch op doing the GEMM


# ------------------------------------------------------------------------------------ protocol coverage


def test_bundled_kb_has_no_dead_end_under_any_preset() -> None:
    skills, issues = load_report([[SKILLS]])
    report = lint(skills, issues)
    assert not [f for f in report.errors if f.code == "dead_end"], [str(f) for f in report.errors]
    assert report.dead_ends() == 0
    summary = report.protocol_summary()
    assert {r["protocol"] for r in summary} == set(PRESETS)
    assert {(r["dtype"], r["arch_sm"], r["forward"]) for r in summary} >= {
        ("fp32", 90, "any"), ("fp32", 90, "custom_kernel_dominates"), ("fp16", 80, "any")}
    for r in summary:
        assert r["cells"] > 0 and r["min_permitted"] >= MIN_PERMITTED, r
    strict = [c for c in report.protocol_coverage if c.scenario.protocol == "strict" and c.scenario.dtype == "fp32"
              and c.bottleneck == "compute_bound_fp32" and c.structure == 1 and c.tier == "tier_m"]
    assert strict and all(c.permitted for c in strict)


def _skills_with(tmp_path: Path, case_methods: str) -> Path:
    """A copy of the bundled skills whose conv case lists only ``case_methods``."""
    import shutil

    dest = tmp_path / "skills"
    shutil.copytree(SKILLS, dest)
    path = dest / "cases" / "compute.yaml"
    text = path.read_text()
    old = re.search(r"(  - id: cf_conv\n(?:    .*\n)*?    methods: )\[[^\]]*\]", text)
    assert old is not None
    path.write_text(text.replace(old.group(0), old.group(1) + case_methods, 1))
    return dest


def test_lint_fails_on_the_old_conv_dead_end(tmp_path: Path) -> None:
    # the conv case before the GEMM/conv methods: tensor cores carry the precision tag, cuDNN the library tag
    report = lint(load_skills([_skills_with(tmp_path, "[tensor_core_mma, cudnn_conv, cublas_gemm]")]))
    dead = [f for f in report.errors if f.code == "dead_end" and f.object_id == "cf_conv"]
    assert len(dead) == 1, [str(f) for f in report.errors]
    msg = dead[0].message
    assert "strict (fp32" in msg and "keeps 0 method(s)" in msg
    assert "tensor_core_mma (veto no_precision_downcast_fp32)" in msg and "cudnn_conv (veto no_library_when_forbidden)" in msg
    assert dead[0].file.endswith("compute.yaml") and dead[0].line > 0
    # the kernelbench preset (TF32 off, libraries on) keeps cuDNN: only the strict scenarios are dead ends
    cells = [c for c in report.protocol_coverage if c.permitted.get("cf_conv") == 0]
    assert cells and {c.scenario.protocol for c in cells} == {"strict"}


def test_lint_accepts_the_conv_case_with_compensated_and_winograd_methods(tmp_path: Path) -> None:
    methods = "[tensor_core_mma, cudnn_conv, ec_tf32_implicit_gemm_conv, winograd_conv3x3]"
    report = lint(load_skills([_skills_with(tmp_path, methods)]))
    assert not [f for f in report.errors if f.object_id == "cf_conv"]
    cells = [c for c in report.protocol_coverage if "cf_conv" in c.permitted and c.scenario.protocol == "strict"
             and c.scenario.dtype == "fp32"]
    assert cells and {c.permitted["cf_conv"] for c in cells} == {2}


# ------------------------------------------------------------------------------ the dead end, queried


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    from kernelskill.kb.home import open_store

    home = tmp_path_factory.mktemp("gemm_conv_home")
    s = load_settings(home=home)
    open_store(s).close()  # builds the KB from the bundled skills
    return s


def _query(settings, protocol: str):
    context = {"task_dtype": "fp32", **PRESETS[protocol].context("fp32")}
    return query(DATA / "conv3x3_direct.py", task=DATA / "conv3x3_task.py", profile=DATA / "conv3x3_direct.csv",
                 settings=settings, context=context, k=10)


def test_compute_bound_fp32_conv_under_strict_keeps_two_methods(settings) -> None:
    result = _query(settings, "strict")
    assert result.bottleneck.id == "compute_bound_fp32"
    permitted = [m.id for m in result.permitted]
    assert len(permitted) >= MIN_PERMITTED, (result.case.id, [(f.id, f.reason) for f in result.forbidden])
    tags = {mid: set(load_method(mid).tags) for mid in permitted}
    assert not any(t & {"precision", "library"} for t in tags.values()), tags
    # tensor cores only through the error-compensated split; the GEMM/conv methods for CUDA cores stay
    assert all(mid.startswith("ec_tf32") for mid, t in tags.items() if "tensor_core" in t), permitted
    assert set(permitted) & {"ec_tf32_implicit_gemm_conv", "winograd_conv3x3", "implicit_gemm_conv"}
    forbidden = {f.id: f.veto for f in result.forbidden}
    assert forbidden.get("cudnn_conv") in (None, "no_library_when_forbidden")
    assert forbidden.get("tensor_core_mma") in (None, "no_precision_downcast_fp32")


def test_the_kernelbench_preset_admits_cudnn_for_the_same_conv(settings) -> None:
    result = _query(settings, "kernelbench")
    permitted = {m.id for m in result.permitted}
    assert len(permitted) >= MIN_PERMITTED
    assert "no_library_when_forbidden" not in {f.veto for f in result.forbidden}
