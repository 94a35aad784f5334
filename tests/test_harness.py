"""CPU tests of the harness pieces that need no CUDA: records, tolerances, comparison, env
scrubbing, task loading, the light CUDA prelude, ncu CSV parsing, op judging, the fast-path compiler
(nvcc is installed on the CI machine) and the fast-path argument checks."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.harness import EvalConfig, EvalResult
from kernelskill.pipeline.harness.build import build_key, light_cuda_source
from kernelskill.pipeline.harness.checks import OpRecord, OpRecorder, judge_ops, output_problems
from kernelskill.pipeline.harness.compare import compare_outputs
from kernelskill.pipeline.harness.loader import cu_forward_declaration, inspect_candidate, inspect_task
from kernelskill.pipeline.harness.profiling import PERMISSION_HELP, parse_ncu_csv
from kernelskill.pipeline.harness.results import STATUSES, trim_log
from kernelskill.pipeline.harness.sandbox import scrub_env
from kernelskill.pipeline.harness.worker import classify_exception


# --- records ------------------------------------------------------------------------------------
def test_eval_result_json_round_trip():
    r = EvalResult(status="mismatch", message="bad", details={"first_bad_index": [0, 3], "max_abs_err": 0.5},
                   candidate_ms=1.5, baseline_ms=3.0, speedup=2.0)
    back = EvalResult.from_dict(json.loads(r.to_json()))
    assert back == r


def test_eval_result_rejects_unknown_status_and_fields():
    with pytest.raises(ValueError, match="not one of"):
        EvalResult(status="fine")
    with pytest.raises(ValueError, match="unknown field"):
        EvalResult.from_dict({"status": "ok", "bogus": 1})
    assert set(STATUSES) >= {"ok", "compile_error", "illegal_memory_access", "timeout", "oom", "wrong_shape",
                             "mismatch", "nondeterministic", "cheat", "runtime_error"}


def test_config_round_trip_and_tolerances():
    cfg = EvalConfig(tolerances={"float16": [5e-2, 5e-2]}, timing_trials=7)
    assert EvalConfig.from_dict(json.loads(cfg.to_json())) == cfg
    assert cfg.tolerance("float32") == (1e-4, 1e-4)  # KernelBench's current fp32 default
    assert cfg.tolerance("bfloat16") == (1e-2, 1e-2)
    assert cfg.tolerance("float16") == (5e-2, 5e-2)
    assert EvalConfig(atol=1e-3).tolerance("float32") == (1e-3, 1e-4)


def test_trim_log_keeps_errors_and_tail():
    lines = [f"compiling step {i}" for i in range(3000)]
    lines[1500] = "x.cu(12): error: identifier \"foo\" is undefined"
    out = trim_log("\n".join(lines), 2000)
    assert len(out) <= 2100 and "identifier \"foo\" is undefined" in out and "step 2999" in out


# --- comparison ---------------------------------------------------------------------------------
def _cmp(ref, out, **cfg):
    return compare_outputs(ref, out, EvalConfig(**cfg))


def test_compare_ok_within_tolerance():
    r = torch.rand(100, 10)
    assert _cmp(r, r + 1e-6).ok


def test_compare_mismatch_reports_errors_and_first_index():
    r = torch.zeros(4, 5)
    o = r.clone()
    o[2, 3] = 1.0
    res = _cmp(r, o)
    assert res.status == "mismatch"
    assert res.details["first_bad_index"] == [2, 3]
    assert res.details["max_abs_err"] == pytest.approx(1.0)
    assert "first bad index [2, 3]" in res.message


def test_nan_and_inf_never_pass_even_with_huge_tolerance():
    r = torch.ones(8)
    for bad in (float("nan"), float("inf")):
        o = r.clone()
        o[5] = bad
        res = _cmp(r, o, atol=1e9, rtol=1e9)
        assert res.status == "mismatch" and res.details["nonfinite"] == 1


def test_matching_nonfinite_reference_passes():
    r = torch.tensor([1.0, float("inf"), float("nan")])
    assert _cmp(r, r.clone()).ok


def test_zero_output_on_tiny_reference_fails_relative_l2():
    r = torch.softmax(torch.rand(2, 393216), dim=1)  # values ~2.5e-6, below atol
    assert torch.allclose(torch.zeros_like(r), r, atol=1e-4, rtol=1e-4)
    res = _cmp(r, torch.zeros_like(r))
    assert res.status == "mismatch" and res.details["check"] == "relative_l2"


def test_shapes_counts_and_tuples():
    a, b = torch.rand(3, 4), torch.rand(2)
    assert _cmp(a, a[:, :3]).status == "wrong_shape"
    assert _cmp((a, b), (a,)).status == "wrong_shape"
    res = _cmp((a, b), (a, b + 1))
    assert res.status == "mismatch" and res.details["output_index"] == 1
    assert _cmp([a, (b, 3)], [a.clone(), (b.clone(), 3)]).ok


def test_dtype_and_integer_outputs():
    r = torch.arange(10)
    assert _cmp(r, r.clone()).ok
    assert _cmp(r, r + 1).status == "mismatch"
    assert _cmp(torch.rand(3), torch.rand(3).double()).details.get("check") == "dtype"


def test_per_dtype_tolerance_is_used():
    r = torch.ones(10, dtype=torch.float16)
    assert _cmp(r, r + 0.005).ok  # inside fp16's 1e-2
    assert not _cmp(r.float(), r.float() + 0.005).ok  # outside fp32's 1e-4


# --- isolation helpers --------------------------------------------------------------------------
def test_scrub_env_drops_secrets_keeps_toolchain():
    env = scrub_env({"PATH": "/bin", "OPENAI_API_KEY": "sk-1", "HF_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
                     "CUDA_HOME": "/usr/local/cuda", "CUDA_VISIBLE_DEVICES": "1", "PYTHONPATH": "/x",
                     "TORCH_EXTENSIONS_DIR": "/e", "GITHUB_TOKEN": "g", "KERNELSKILL_LLM_API_KEY": "k",
                     "MY_PASSWORD": "p", "DOCKER_AUTH_CONFIG": "a", "RANDOM_VAR": "r",
                     "CUDA_API_KEY": "sneaky"})
    assert env["PATH"] == "/bin" and env["CUDA_HOME"] == "/usr/local/cuda" and env["PYTHONPATH"] == "/x"
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["TORCH_EXTENSIONS_DIR"] == "/e"
    for gone in ("OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "KERNELSKILL_LLM_API_KEY",
                 "MY_PASSWORD", "DOCKER_AUTH_CONFIG", "RANDOM_VAR", "CUDA_API_KEY"):
        assert gone not in env


def test_classify_exception():
    assert classify_exception(RuntimeError("CUDA error: an illegal memory access was encountered"))[:1] == (
        "illegal_memory_access",)
    assert classify_exception(RuntimeError("CUDA error: operation not supported on global/shared address "
                                           "space"))[2] is True  # 717 is sticky
    assert classify_exception(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate"))[0] == "oom"
    assert classify_exception(ValueError("bad"))[0] == "runtime_error"
    from kernelskill.pipeline.harness.build import CandidateBuildError

    status, _msg, sticky, log = classify_exception(CandidateBuildError("load_inline failed", "error: x"))
    assert (status, sticky, log) == ("compile_error", False, "error: x")


# --- loading ------------------------------------------------------------------------------------
def test_inspect_task_and_candidate_errors(tmp_path):
    good = tmp_path / "t.py"
    good.write_text("import torch\nbatch_size = 8\nclass Model(torch.nn.Module):\n    pass\n"
                    "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    spec = inspect_task(good)
    assert spec.batch_size == 8 and not spec.has_alt_inputs
    bad = tmp_path / "b.py"
    bad.write_text("class Model:\n    pass\n")
    with pytest.raises(KernelskillError, match=r"b\.py:1: task must define get_inputs, get_init_inputs"):
        inspect_task(bad)
    broken = tmp_path / "c.py"
    broken.write_text("x = (\n")
    with pytest.raises(KernelskillError, match=r"c\.py:1: task does not parse"):
        inspect_task(broken)
    with pytest.raises(KernelskillError, match="not found"):
        inspect_task(tmp_path / "missing.py")
    nomodel = tmp_path / "n.py"
    nomodel.write_text("x = 1\n")
    with pytest.raises(KernelskillError, match="must define class ModelNew"):
        inspect_candidate(nomodel)


def test_cu_forward_declaration():
    src = "__global__ void k(){}\ntorch::Tensor forward(torch::Tensor x, int64_t n) {\n return x; }"
    assert cu_forward_declaration(src) == "torch::Tensor forward(torch::Tensor x, int64_t n);"
    with pytest.raises(KernelskillError):
        cu_forward_declaration("__global__ void k(){}")


# --- build helpers ------------------------------------------------------------------------------
def test_light_cuda_source_replaces_heavy_headers():
    src = ("#include <torch/extension.h>\n#include <cuda_runtime.h>\n__global__ void k(float* x){}\n"
           "torch::Tensor f(torch::Tensor x){ auto y = torch::empty_like(x); at::zeros({1}); return y; }\n")
    out = light_cuda_source(src)
    assert out is not None
    assert "torch/extension.h" not in out and "namespace torch { using namespace at; }" in out
    # the per-operator headers it names are inlined without the ATen/Context.h family they include
    assert "KS_SLIM_OP_empty_like" in out and "KS_SLIM_OP_zeros" in out and "KS_SLIM_TENSOR_OPERATORS" in out
    assert "ATen/Context.h" not in out and "ATen/Functions.h" not in out
    assert "ATen/Dispatch.h" not in out and "AT_DISPATCH" not in src  # only when the unit dispatches
    assert light_cuda_source("#include <torch/extension.h>\nPYBIND11_MODULE(m, x) {}") is None


def test_build_key_depends_on_source_and_options():
    k = build_key("a", arch="sm_90", fast_headers=True)
    assert k == build_key("a", arch="sm_90", fast_headers=True)
    assert k != build_key("b", arch="sm_90", fast_headers=True)
    assert k != build_key("a", arch="sm_80", fast_headers=True)
    assert k != build_key("a", arch="sm_90", fast_headers=False)


# --- profile parsing ----------------------------------------------------------------------------
def test_parse_ncu_csv_header_units_rows():
    text = ('==PROF== Connected to process 1\n"ID","Kernel Name","gpu__time_duration.avg"\n'
            '"","","ns"\n"0","add","14144"\n"1","ampere_sgemm","2,048"\n==PROF== Disconnected\n')
    rows, units = parse_ncu_csv(text)
    assert units["gpu__time_duration.avg"] == "ns"
    assert [r["Kernel Name"] for r in rows] == ["add", "ampere_sgemm"] and rows[1]["gpu__time_duration.avg"] == "2,048"
    assert "ERR_NVGPUCTRPERM" in PERMISSION_HELP


def test_profile_without_ncu_says_so(monkeypatch, tmp_path):
    from kernelskill.pipeline.harness import profiling as prof_mod

    monkeypatch.setattr(prof_mod, "find_ncu", lambda: None)
    res = prof_mod.profile("task.py", "cand.py")
    assert not res.ok and "ncu" in res.message


# --- op judging ---------------------------------------------------------------------------------
def _rec(**ops):
    r = OpRecord()
    r.ops.update(ops)
    return r


def test_judge_ops_policies():
    ref = _rec(add=1)
    assert judge_ops(ref, _rec(add=1, empty_like=1), policy="forbid", task_is_fp32=True)[0] == "torch_compute"
    assert judge_ops(ref, _rec(empty_like=1), policy="forbid", task_is_fp32=True) is None
    gemm = _rec(mm=1)
    assert judge_ops(gemm, _rec(mm=1), policy="forbid", task_is_fp32=True)[0] == "library_call"
    assert judge_ops(gemm, _rec(mm=1), policy="allow_gemm_conv", task_is_fp32=True) is None
    fused = _rec(addmm=1, relu=1)
    assert judge_ops(fused, _rec(addmm=1, relu=1), policy="allow_gemm_conv",
                     task_is_fp32=True)[0] == "torch_compute"
    half = _rec(mm=1)
    half.low_precision_ops.update(_to_copy=2)
    assert judge_ops(_rec(relu=1), half, policy="allow_gemm_conv", task_is_fp32=True)[0] == "precision_downcast"


def test_op_recorder_sees_aten_ops_and_low_precision():
    x = torch.rand(4, 4)
    with OpRecorder() as rec:
        (x.half() @ x.half()).float() + 1
    assert rec.record.ops["mm"] == 1 and rec.record.low_precision_ops["mm"] == 1


def test_output_problems_subclass_and_alias():
    class Sub(torch.Tensor):
        pass

    x = torch.rand(4)
    assert output_problems([x.as_subclass(Sub)], [x], reference_aliases=False)[0] == "tensor_subclass"
    assert output_problems([x[1:]], [x], reference_aliases=False)[0] == "output_aliases_input"
    assert output_problems([x[1:]], [x], reference_aliases=True) is None
    assert output_problems([x.clone()], [x], reference_aliases=False) is None


# --- fast path (nvcc is on the CI box; no GPU needed to compile) ---------------------------------
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


@needs_nvcc
def test_fastpath_compiles_caches_and_reports_errors(tmp_path, monkeypatch):
    from kernelskill.pipeline.harness import fastpath

    monkeypatch.setenv(fastpath.CACHE_ENV, str(tmp_path))
    src = 'extern "C" __global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 1.f; }'
    data, info = fastpath.compile_cubin(src, arch="sm_90", backend="nvcc")
    assert data[:4] == b"\x7fELF" and not info["cached"]
    again, info2 = fastpath.compile_cubin(src, arch="sm_90", backend="nvcc")
    assert again == data and info2["cached"] and info2["seconds"] < 0.1
    with pytest.raises(fastpath.FastPathCompileError, match="undefined"):
        fastpath.compile_cubin(src.replace("1.f", "undefined_thing"), arch="sm_90", backend="nvcc")


@needs_nvcc
def test_fastpath_argument_checks(tmp_path, monkeypatch):
    from kernelskill.pipeline.harness import fastpath

    monkeypatch.setenv(fastpath.CACHE_ENV, str(tmp_path))
    mod = fastpath.CudaModule('extern "C" __global__ void k(float* x, int n) {}', name="k")
    with pytest.raises(ValueError, match="unknown argument type"):
        mod.kernel("k", "ptr, int128")
    k = mod.kernel("k", "ptr, int")
    assert k.signature == ["ptr", "i32"]
    with pytest.raises(TypeError, match="CPU tensor"):
        k._convert([torch.zeros(2), 3])
    with pytest.raises(TypeError, match="1 arguments given, signature has 2"):
        k._convert([3])
    loose = mod.kernel("k")
    with pytest.raises(OverflowError, match="declare it i64"):
        loose._convert([1, 2**40])


# --- the one-nvcc-call load_inline route (parsing and code generation) -------------------------------
def test_inline_fast_signature_parsing():
    from kernelskill.pipeline.harness.inline_fast import NotEligible, parse_signature, wrapper_source

    cpp = ["torch::Tensor fwd(torch::Tensor x, const at::Tensor& w, int n, double eps, bool flag);\n"
           "std::vector<torch::Tensor> both(torch::Tensor a);\nvoid touch(torch::Tensor a, int64_t k = 3);"]
    assert parse_signature("fwd", cpp)[:2] == ("ttifb", "t")
    assert parse_signature("both", cpp)[:2] == ("t", "l")
    assert parse_signature("touch", cpp)[:2] == ("ti", "v")
    with pytest.raises(NotEligible):
        parse_signature("missing", cpp)
    with pytest.raises(NotEligible, match="parameter type"):
        parse_signature("g", ["torch::Tensor g(c10::optional<torch::Tensor> x);"])
    src = wrapper_source("fwd", "ttifb", "t", ["torch::Tensor", "at::Tensor", "int", "double", "bool"])
    assert 'extern "C" int ks_wrap_fwd' in src and "static_cast<int>(*reinterpret_cast<int64_t*>(a[2]))" in src


def test_light_fault_heuristic():
    from kernelskill.pipeline.harness.build import light_may_be_at_fault

    own = 'x/cuda.cu(3): error: identifier "undefined_symbol" is undefined\n1 error detected'
    assert not light_may_be_at_fault(own)  # the candidate's own mistake: no retry with heavier headers
    assert light_may_be_at_fault('cuda.cu(8): error: no operator "+" matches these operands\n'
                                 "  operand types are: at::Tensor + int64_t")
    assert light_may_be_at_fault("ninja: build stopped: subcommand failed.")


def test_profile_asks_again_without_a_metric_this_ncu_does_not_know(monkeypatch, tmp_path):
    """ncu refuses a whole run for one unknown metric name: the profile is taken again without it and says so."""
    from kernelskill.pipeline.harness import profiling as prof_mod
    from tests.test_loop_helpers import ADD_CANDIDATE, ADD_TASK

    calls = tmp_path / "calls.txt"
    fake = tmp_path / "ncu"
    fake.write_text(f"""#!/bin/sh
while [ "$1" != "--metrics" ]; do shift; done
echo "$2" >> {calls}
case "$2" in *made_up__metric.sum*)
  echo '==ERROR== Failed to find metric regex:made_up__metric.sum'; exit 1;;
esac
echo '"ID","Kernel Name","gpu__time_duration.avg"'
echo '"","","ns"'
echo '"0","add_kernel","2048"'
""")
    fake.chmod(0o755)
    monkeypatch.setattr(prof_mod, "find_ncu", lambda: str(fake))
    # the retry is under test, not the sandbox (in which the fake could not write its calls file)
    monkeypatch.setenv("KERNELSKILL_HARNESS_ISOLATION", "process")
    monkeypatch.setattr(prof_mod, "available_isolation", lambda: "process-only")
    from kernelskill.pipeline.harness import isolation

    monkeypatch.setattr(isolation, "available", lambda: "process-only")
    (tmp_path / "task.py").write_text(ADD_TASK)
    (tmp_path / "cand.py").write_text(ADD_CANDIDATE)
    res = prof_mod.profile(tmp_path / "task.py", tmp_path / "cand.py",
                           metrics=("gpu__time_duration.avg", "made_up__metric.sum"))
    assert res.ok and [r["Kernel Name"] for r in res.rows] == ["add_kernel"]
    assert "does not know made_up__metric.sum" in res.message
    assert calls.read_text().splitlines() == ["gpu__time_duration.avg,made_up__metric.sum", "gpu__time_duration.avg"]
