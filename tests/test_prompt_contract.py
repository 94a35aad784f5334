"""The code-writing prompts state the run's contract: tolerance, precision, libraries, torch helpers, shapes,
and the GPU's SM count, bandwidth and L2 (rendered with the real templates)."""

from __future__ import annotations

import pytest

from kernelskill.pipeline.harness.gpu_facts import gpu_facts, prompt_gpu
from kernelskill.pipeline.loop.agents import default_gpu, render


def _render(role: str, gpu: dict) -> str:
    """The role's real template; the other context it needs (task, memory, method...) is left empty."""
    import jinja2

    from kernelskill.pipeline.loop.agents import environment

    env = environment()  # the loop's own environment (its filters), lenient about the missing context
    env.undefined = jinja2.ChainableUndefined
    return env.get_template(f"{role}.j2").render(gpu=gpu, history=[], method={}, format_notes={}, memory={},
                                                 failure={}, diagnosis={})


def test_gpu_facts_by_name_and_arch():
    assert gpu_facts("NVIDIA H200")["sm_count"] == 132
    h200 = gpu_facts(arch="sm_90")
    assert (h200["l2_mb"], h200["hbm_peak_tb_s"], h200["copy_tb_s"]) == (60, 4.8, 4.3)
    assert gpu_facts("Some Other GPU", "sm_75") == {}


@pytest.mark.parametrize("role", ["generator", "optimizer", "repairer"])
def test_strict_contract_in_every_code_writing_prompt(role):
    text = _render(role, default_gpu("sm_90", protocol="strict"))
    assert "protocol `strict`" in text
    assert "atol=0.0001 and rtol=0.0001" in text and "no plain TF32" in text and "error-compensated TF32" in text
    assert "no cuBLAS/cuDNN" in text and "rejected" in text
    assert "`.contiguous()`" in text and "`torch.empty`" in text
    assert "every size the task defines at module level" in text and "not multiples of 32" in text
    assert "132 SMs" in text and "4.8 TB/s" in text and "60 MB L2" in text and "NVIDIA H200" in text


def test_kernelbench_contract_allows_libraries_and_warns_on_torch_ops():
    text = render("partials/contract.j2", gpu=prompt_gpu("sm_90", protocol="kernelbench"))
    assert "protocol `kernelbench`" in text
    assert "cuBLAS/cuDNN (torch.matmul, F.linear, F.conv*) may do the GEMM/convolution part" in text
    assert "accepted with a warning" in text and "changes the batch size" in text
    assert "atol=0.01, rtol=0.01 for fp16/bf16" in text


def test_user_protocol_file_reaches_the_prompt(tmp_path):
    f = tmp_path / "tf32ok.toml"
    f.write_text('base = "strict"\nallow_tf32 = true\n[tolerances]\nfloat32 = [0.001, 0.001]\n')
    text = render("partials/contract.j2", gpu=prompt_gpu("sm_90", protocol=str(f)))
    assert "protocol `tf32ok`" in text and "TF32 or other reduced-precision math" in text
    assert "atol=0.001 and rtol=0.001" in text


def test_no_contract_no_section():
    assert render("partials/contract.j2", gpu={"name": "X", "arch": "sm_90", "notes": ""}).strip() == ""


# The contract stated whole (issue 31, item 8) -------------------------------------------------------------
def _context(protocol: str = "strict") -> dict:
    from tests.test_loop_helpers import TASK, kernel

    long_plan = ("Stage the K tiles through shared memory with cp.async. " * 12).strip()
    memory = {"attempts": [{"round": 1, "branch": "optimize", "method": "m1", "parent": "candidates/r00.py",
                            "derived_from": "candidates/r00.py", "result_class": "ok", "speedup": 1.2,
                            "accepted": True, "diff_summary": "", "profile_deltas": {}, "plan": long_plan,
                            "review": ""}],
              "repairs": [], "total_attempts": 1}
    parent = {"step": "r01.optimize", "result": {"speedup": 1.2, "candidate_ms": 2.5, "candidate_iqr_ms": 0.01}}
    return {"task_source": TASK, "kernel_source": kernel("speedup=1.0"), "gpu": default_gpu("sm_90", protocol=protocol),
            "memory": memory, "failure": {"status": "mismatch", "message": "diff", "build_log": ""},
            "diagnosis": {"root_cause": "rc", "fix": "fx"}, "method": {"id": "m2", "name": "", "guidance": "g"},
            "plan": {"plan": "p"}, "candidate": {"step": "r02.optimize", "branch": "optimize", "method": "m2"},
            "result": {"status": "ok", "correct": True, "speedup": 1.5, "candidate_ms": 2.0,
                       "candidate_iqr_ms": 0.01, "baseline_ms": 3.0},
            "parent": parent, "decision": {"reason": "measured 1.500x vs parent 1.200x"},
            "diff": "--- candidates/r01.optimize.py\n+++ candidates/r02.optimize.py\n@@ -1 +1 @@\n-a\n+b",
            "noise_rule": "the rule", "long_plan": long_plan}


@pytest.mark.parametrize("role", ["generator", "optimizer", "repairer", "reviewer"])
def test_every_code_writing_and_reviewing_prompt_states_the_contract_whole(role):
    from kernelskill.pipeline.loop.agents import messages_for

    ctx = _context()
    long_plan = ctx.pop("long_plan")
    text = messages_for(role, **ctx)[1]["content"]
    assert "Float64 check (fp32 tasks)" in text and "max(32 x the fp32 reference's own such error, 2e-05)" in text
    assert "- Build flags: `load_inline(..., extra_cuda_cflags=[...])`" in text
    assert "-gencode=arch=compute_90a,code=sm_90a" in text and "__CUDA_ARCH_FEAT_SM90_ALL" in text
    assert "Replacing the parent: decided by the measurements" in text
    assert long_plan in text and "not shown" not in text  # earlier plans whole
    if role == "reviewer":
        assert "Your answer: the code fence" not in text  # the reviewer answers JSON
        assert "+++ candidates/r02.optimize.py" in text and "The noise rule of this run: the rule." in text
    else:
        assert "Your answer: the code fence is optional" in text


def test_the_build_flags_follow_the_format_and_the_protocol():
    from kernelskill.pipeline.loop.agents import messages_for

    ctx = _context("kernelbench")
    ctx.pop("long_plan")
    assert '`extra_ldflags=["-lcublas"]`' in messages_for("optimizer", **ctx)[1]["content"]
    strict = _context()
    strict.pop("long_plan")
    assert "no cuBLAS/cuDNN may do the main work under this protocol" in messages_for("optimizer", **strict)[1]["content"]
    fast = messages_for("generator", candidate_format="fastpath", **strict)[1]["content"]
    assert 'arch="sm_90a"' in fast and "no `-l` flags" in fast
    triton = messages_for("repairer", candidate_format="triton", **strict)[1]["content"]
    assert "- Build flags: none: Triton compiles the kernels itself" in triton
    assert "define at least one `@triton.jit` kernel" in triton


def test_what_the_prompt_says_about_the_fence_is_what_the_parser_does():
    from kernelskill.pipeline.loop.agents import extract_code
    from tests.test_loop_helpers import kernel

    code = kernel("speedup=1.0")
    assert extract_code(code)[0] == code  # no fence at all: the file itself
    assert extract_code("Here it is:\n" + code)[0].startswith("# harness")  # from its first `#` line on
    older = code.replace("1.0", "0.5")
    assert extract_code(f"```python\n{older}```\nthen\n```python\n{code}```")[0] == code  # the last such block
    assert extract_code(f"```cuda\n{code}```")[0] == code  # failing a python block, any block with ModelNew


def test_the_stated_float64_bound_is_the_harness_bound():
    """protocols.FP64_ERROR_FACTOR / FP64_ERROR_FLOOR are what the prompts state; the harness's precision check
    must apply the same numbers."""
    import re
    from pathlib import Path

    from kernelskill.protocols import FP64_ERROR_FACTOR, FP64_ERROR_FLOOR

    source = (Path(__file__).resolve().parents[1] / "pipeline" / "harness" / "evaluation.py").read_text()
    found = re.findall(r"max\((\w+|\d+) \* e_ref, ([\w.eE+-]+)\)", source)
    assert found, "the harness's float64 bound is no longer written as max(F * e_ref, floor)"
    for factor, floor in found:
        assert factor in ("FP64_ERROR_FACTOR", str(FP64_ERROR_FACTOR))
        assert floor == "FP64_ERROR_FLOOR" or float(floor) == FP64_ERROR_FLOOR


def test_the_reviewer_diff_holds_a_whole_rewrite_of_a_large_candidate():
    """The reviewer sees the change only as a diff: a rewrite of a 500-line kernel file (about 35 KB each
    way) comes whole, and a diff past the cap says how much it left out."""
    from kernelskill.pipeline.loop.memory import unified_diff

    parent = "\n".join(f"    float a{i} = __ldg(x + {i}) * 0.5f + bias[{i} % 64];  // parent line" for i in range(500))
    child = "\n".join(f"    float4 v{i} = reinterpret_cast<const float4*>(x)[{i}];  // child line {i}" for i in range(500))
    whole = unified_diff(parent, child)
    assert "not shown" not in whole and whole.count("\n-    float a") == 500 and whole.count("\n+    float4") == 500
    cut = unified_diff(parent, child, max_lines=100)
    assert cut.endswith("more lines, not shown)") and cut.count("\n") == 100
