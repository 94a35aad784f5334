"""The convolution knowledge of issue 32: error-compensated TF32 through cuDNN (ec_tf32_library_conv) and the
tail fused after a library convolution (library_conv_epilogue_fusion), their worked examples, their routing
under the kernelbench and strict protocols, and the evidence writer of benchmarks/ec_tf32_conv_accuracy.py.

CPU only. The example files are parsed; the channel stacking of the compensated example is run on the CPU with
its Triton kernels replaced by the same rounding in torch (Triton is not installed here), against float64.
Routing uses the real query API on the bundled skills (tests/test_gemm_routing.py's in-memory KB) with a
held-out conv forward written for this test (tests/data/conv_heldout: cuDNN + a tanh/scale/bias kernel).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import shutil
import sys
import types
from pathlib import Path

import pytest
import yaml

from kernelskill.kb.loader import load_skills
from tests.example_files import init_params, load_method, top_names
from tests.test_gemm_routing import FAMILIES, run
from tests.test_kb_gemm_conv_knowledge import test_method_is_complete as method_is_complete

ROOT = Path(__file__).resolve().parents[1]
SKILLS = ROOT / "kb" / "skills"
HELDOUT = ROOT / "tests" / "data" / "conv_heldout"
NEW = ("ec_tf32_library_conv", "library_conv_epilogue_fusion")
BENCH = ROOT / "benchmarks" / "ec_tf32_conv_accuracy.py"


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------ the methods


@pytest.mark.parametrize("mid", NEW)
def test_method_is_complete_and_carries_the_library_tag(mid: str) -> None:
    method_is_complete(mid)
    tags = set(load_method(mid).tags)
    assert "library" in tags and "precision" not in tags  # strict removes it; it keeps fp32 accuracy
    assert "convolution" in tags


def test_the_compensated_conv_is_a_tensor_core_method_like_its_gemm_sibling() -> None:
    conv, gemm = set(load_method("ec_tf32_library_conv").tags), set(load_method("ec_tf32_library_gemm").tags)
    assert {"library", "tensor_core", "error_compensation"} <= conv & gemm
    vetoes = {v["id"]: v for v in yaml.safe_load((SKILLS / "vetoes.yaml").read_text())["vetoes"]}
    assert set(NEW) <= set(vetoes["conv_methods_need_conv"]["methods"])


# ------------------------------------------------------------------------------------------ the examples


@pytest.mark.parametrize("mid", NEW)
def test_examples_are_kernelbench_files(mid: str) -> None:
    folder = SKILLS / "examples" / mid
    assert {"Model", "get_inputs", "get_init_inputs"} <= top_names(folder / "task.py")
    for variant in ("before", "after"):
        path = folder / f"{variant}.py"
        assert "ModelNew" in top_names(path)
        assert init_params(path, "ModelNew") == init_params(folder / "task.py", "Model")
        text = path.read_text()
        compile(text, str(path), "exec")  # parses and compiles (nothing runs)
        assert "@triton.jit" in text or variant == "before"
        # TF32 only inside a cudnn.flags scope around one call, never a global switch
        assert not re.search(r"torch\.backends\.cudnn\.allow_tf32\s*=", text)
        assert not re.search(r"set_float32_matmul_precision|matmul\.allow_tf32", text)


def test_compensated_example_splits_stacks_and_scopes_tf32() -> None:
    after = (SKILLS / "examples" / "ec_tf32_library_conv" / "after.py").read_text()
    before = (SKILLS / "examples" / "ec_tf32_library_conv" / "before.py").read_text()
    assert "allow_tf32=False" in before and "allow_tf32=True" not in before
    assert after.count("allow_tf32=True") == 1  # the one stacked call
    assert "(bits + 0x1000) & -8192" in after  # round to nearest TF32 (0xffffe000 as int32), hi and lo alike
    assert "_tf32_round(v - hi)" in after
    assert "w._version" in after and "w.data_ptr()" in after  # the weight split cached by parameter version
    tree = ast.parse(after)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    assert {"stack_input", "stack_weight", "ec_tf32_conv", "WeightSplitCache"} <= names


def test_candidate_patterns_that_the_compensated_example_meets_are_the_tf32_scope_and_the_weight_key() -> None:
    """The example asks for TF32 inside its own scope and keys its weight cache on ``_version``: the two
    candidate patterns it meets, which the harness must judge by the float64 check (no timer, stream, thread
    or output-cache pattern)."""
    vetoes = yaml.safe_load((SKILLS / "vetoes.yaml").read_text())["vetoes"]
    after = (SKILLS / "examples" / "ec_tf32_library_conv" / "after.py").read_text()
    hits = {(v["id"], p) for v in vetoes if "candidate" in v.get("scope", []) for p in v.get("patterns", [])
            if re.search(p, after)}
    ids = {h[0] for h in hits}
    assert ids <= {"no_precision_downcast_fp32", "no_output_caching", "no_reference_op_for_main_computation"}, hits
    assert {p for v, p in hits if v == "no_precision_downcast_fp32"} == {r"allow_tf32\s*=\s*True"}
    assert {p for v, p in hits if v == "no_output_caching"} == {r"\._version\b"}


def test_fused_tail_example_has_no_torch_tail_and_merges_statistics_stably() -> None:
    after = (SKILLS / "examples" / "library_conv_epilogue_fusion" / "after.py").read_text()
    forward = after.split("def forward", 1)[1]
    assert not re.search(r"F\.(group_norm|batch_norm|layer_norm)|torch\.clamp|torch\.tanh", forward)
    assert "F.conv2d(x, self.conv.weight, None" in forward  # the bias moves into the fused kernel
    assert "delta * delta * (count * cnt / total)" in after  # Chan's merge, not E[x^2] - mean^2
    assert "CHANNELS_LAST: tl.constexpr" in after


@pytest.fixture()
def ec_helpers(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The compensated example's module with its Triton split replaced by the same rounding in torch."""
    import torch

    if importlib.util.find_spec("triton") is None:  # only the decorator and cdiv are touched at import
        triton = types.ModuleType("triton")
        language = types.ModuleType("triton.language")
        triton.jit, triton.cdiv, triton.language = (lambda f: f), (lambda a, b: -(-a // b)), language
        language.constexpr = object
        monkeypatch.setitem(sys.modules, "triton", triton)
        monkeypatch.setitem(sys.modules, "triton.language", language)
    module = _load(SKILLS / "examples" / "ec_tf32_library_conv" / "after.py", "kb_ec_conv_after_cpu")

    def tf32(v):
        return ((v.view(torch.int32) + 0x1000) & -8192).view(torch.float32)

    def split_into(src, dst, inner, lo_pos):  # the kernel's contract on raw storage: [rows][3][inner]
        flat = src.as_strided((src.numel(),), (1,))
        hi = tf32(flat.clone())
        lo = tf32(flat - hi)
        parts = [hi.view(-1, inner)] * 3
        parts[lo_pos] = lo.view(-1, inner)
        dst.as_strided((dst.numel(),), (1,)).copy_(torch.stack(parts, 1).reshape(-1))
        return dst

    monkeypatch.setattr(module, "_split_into", split_into)
    return module


@pytest.mark.parametrize(("kind", "kwargs", "shape", "channels_last"), [
    ("Conv2d", dict(in_channels=8, out_channels=16, kernel_size=3, padding=1), (2, 8, 9, 9), False),
    ("Conv2d", dict(in_channels=8, out_channels=16, kernel_size=3, padding=1), (2, 8, 9, 9), True),
    ("Conv2d", dict(in_channels=8, out_channels=16, kernel_size=3, padding=1, groups=4), (2, 8, 9, 9), False),
    ("Conv2d", dict(in_channels=8, out_channels=16, kernel_size=3, padding=1, groups=4), (2, 8, 9, 9), True),
    ("Conv2d", dict(in_channels=8, out_channels=8, kernel_size=3, padding=1, groups=8), (2, 8, 9, 9), False),
    ("Conv2d", dict(in_channels=16, out_channels=8, kernel_size=1), (2, 16, 6, 6), False),
    ("ConvTranspose2d", dict(in_channels=8, out_channels=6, kernel_size=4, stride=2, padding=1), (2, 8, 7, 7), False),
    ("ConvTranspose2d", dict(in_channels=8, out_channels=6, kernel_size=3, stride=2, padding=1, groups=2),
     (2, 8, 7, 7), False),
    ("Conv3d", dict(in_channels=4, out_channels=6, kernel_size=3, padding=1), (2, 4, 5, 6, 7), False),
    ("Conv3d", dict(in_channels=4, out_channels=6, kernel_size=3, padding=1), (2, 4, 5, 6, 7), True),
    ("ConvTranspose3d", dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, output_padding=1),
     (2, 4, 4, 5, 3), False),
])
def test_stacking_keeps_groups_and_transposed_weights_right(ec_helpers, kind, kwargs, shape, channels_last) -> None:
    """On the CPU (fp32 arithmetic, so the three products are summed without TF32 loss) the stacked call equals
    the float64 convolution to fp32 rounding; a wrong pairing of parts or groups is off by O(1)."""
    import torch

    torch.manual_seed(0)
    m = getattr(torch.nn, kind)(**kwargs, bias=False)
    x = torch.rand(shape)
    with torch.no_grad():
        ref = m.double()(x.double())
    m = m.float()
    if channels_last:
        fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
        x, m = x.contiguous(memory_format=fmt), m.to(memory_format=fmt)
    transposed = kind.startswith("ConvTranspose")
    extra = {"output_padding": m.output_padding} if transposed else {}
    stacked = ec_helpers.stack_weight(m.weight, m.groups, transposed)
    assert stacked.shape[0 if transposed else 1] == 3 * m.weight.shape[0 if transposed else 1]
    with torch.no_grad():
        y = ec_helpers.ec_tf32_conv(x, stacked, m.stride, m.padding, m.dilation, m.groups, transposed=transposed,
                                    **extra)
    assert y.shape == ref.shape
    assert float((y.double() - ref).abs().max()) < 2e-6 * max(1.0, float(ref.abs().max()))


def test_weight_split_is_rebuilt_when_the_parameter_changes_in_place(ec_helpers) -> None:
    import torch

    conv = torch.nn.Conv2d(4, 4, 3, bias=False)
    cache = ec_helpers.WeightSplitCache(groups=1)
    first = cache.get(conv.weight).clone()
    assert cache.get(conv.weight).data_ptr() == cache.value.data_ptr()  # same version: reused
    with torch.no_grad():
        conv.weight.mul_(2.0)  # an optimizer step: same data_ptr, new _version
    second = cache.get(conv.weight)
    assert torch.allclose(second[:, :4] + second[:, 4:8], 2 * (first[:, :4] + first[:, 4:8]))


# ------------------------------------------------------------------------------------------ routing


def test_heldout_cudnn_conv_forward_gets_the_library_split_first_under_kernelbench() -> None:
    """A cuDNN-dominated conv forward with a tail (held-out: written for this test, not an example), libraries
    allowed at a strict fp32 tolerance: the compensated TF32 convolution through cuDNN comes first, with a
    profile and without one; under ``strict`` it is never permitted."""
    for profile in (HELDOUT / "profile.csv", None):
        r = run(HELDOUT / "kernel.py", task=HELDOUT / "task.py", profile=profile, protocol="kernelbench")
        assert r.context["dominant_op"] == "conv" and r.context["library_calls_allowed"] is True
        assert "ec_tf32_library_conv" in r.first_methods(2), (r.case.id, [m.id for m in r.permitted])
        assert r.first_methods(1) == ["ec_tf32_library_conv"]
        assert "library_conv_epilogue_fusion" in {m.id for m in r.permitted}
        if profile is not None:
            assert r.bottleneck.id == "library_dominated" and r.case.id == "lib_conv_fp32_split"
        else:
            assert r.static_only and r.case.id == "gc_fs_conv_library_fp32"
        strict = run(HELDOUT / "kernel.py", task=HELDOUT / "task.py", profile=profile, protocol="strict")
        permitted = {m.id for m in strict.permitted}
        assert not permitted & set(NEW), (strict.case.id, permitted)
        assert not any("library" in load_method(mid).tags for mid in permitted)


def test_a_compute_bound_custom_conv_takes_the_library_split_only_where_libraries_are_allowed() -> None:
    """A direct fp32 convolution on the FP32 pipe with a ReLU/bias kernel (gemm_families, synthetic profile):
    under ``kernelbench`` the library split leads; under ``strict`` the library veto removes it, and the
    hand-written compensated implicit GEMM leads instead."""
    kw = {"task": FAMILIES / "conv2d_relu_biasadd_task.py",
          "profile": FAMILIES / "profiles" / "conv2d_relu_biasadd.csv"}
    kb = run(FAMILIES / "conv2d_relu_biasadd_kernel.py", **kw, protocol="kernelbench")
    assert kb.case.id == "gc_cf_conv_strict"
    assert kb.first_methods(2) == ["ec_tf32_library_conv", "ec_tf32_implicit_gemm_conv"]
    strict = run(FAMILIES / "conv2d_relu_biasadd_kernel.py", **kw, protocol="strict")
    forbidden = {f.id: f.veto for f in strict.forbidden}
    assert forbidden["ec_tf32_library_conv"] == "no_library_when_forbidden"
    assert forbidden["library_conv_epilogue_fusion"] == "no_library_when_forbidden"
    assert strict.first_methods(1) == ["ec_tf32_implicit_gemm_conv"]


# ------------------------------------------------------------------------------------------ evidence


def _results(hardware: str = "NVIDIA H100 80GB HBM3") -> dict:
    def row(ms, err, ok=True, outside=0):
        return {"ms": ms, "iqr_ms": 0.002, "max_abs_err": err, "max_err_over_max_abs_ref": err / 10,
                "outside_1e-4_vs_fp64": outside, "allclose_1e-4_vs_fp32_ref": ok, "err_vs_fp32_ref_err": err / 1e-5}

    rows = {"eager_tf32": row(0.30, 4e-3, False, 9000), "eager_fp32": row(0.55, 1e-5), "before": row(0.56, 1e-5),
            "after": row(0.25, 3e-5)}
    return {"hardware": hardware, "date": "2026-12-07", "trials": 50, "timing": "CUDA events; medians",
            "examples": {"ec_tf32_library_conv": {"task": "examples/ec_tf32_library_conv/task.py",
                                                  "inputs": {"task_rand": rows, "randn": rows}},
                         "library_conv_epilogue_fusion": {"task": "examples/library_conv_epilogue_fusion/task.py",
                                                          "inputs": {"task_rand": {**rows, "after": row(0.5, 2e-2,
                                                                                                        False)}}}}}


def test_write_evidence_puts_a_valid_record_into_the_method_yaml(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    shutil.copytree(SKILLS, skills)
    results = tmp_path / "results.json"
    results.write_text(json.dumps(_results()))
    bench = _load(BENCH, "kb_ec_tf32_conv_bench")
    assert bench.main(["--write-evidence", str(results), "--skills", str(skills)]) == 0
    loaded = load_skills([skills])  # the real schema and loader accept the rewritten files
    method = loaded.by_id("ec_tf32_library_conv")
    e = method.latest_measurement()
    assert e is not None and e.hardware == "NVIDIA H100 80GB HBM3" and e.task == method.example.task
    assert (e.before_ms, e.after_ms, e.eager_ms) == (0.56, 0.25, 0.30)
    assert e.speedup == pytest.approx(0.56 / 0.25, rel=1e-3) and e.verdict == "pays"
    assert "against float64" in e.notes and "9000 elements outside" in e.notes
    # the fused-tail example missed 1e-4 in these results: no record written for it (its file is as it was)
    assert (skills / "methods" / "library_conv_epilogue_fusion.yaml").read_text() == \
        (SKILLS / "methods" / "library_conv_epilogue_fusion.yaml").read_text()


def test_write_evidence_refuses_a_cpu_smoke_run_and_leaves_the_yaml(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    shutil.copytree(SKILLS, skills)
    results = tmp_path / "smoke.json"
    results.write_text(json.dumps(_results(hardware="cpu (smoke run)")))
    bench = _load(BENCH, "kb_ec_tf32_conv_bench_smoke")
    assert bench.main(["--write-evidence", str(results), "--skills", str(skills)]) == 2
    for mid in NEW:
        assert (skills / "methods" / f"{mid}.yaml").read_text() == (SKILLS / "methods" / f"{mid}.yaml").read_text()
