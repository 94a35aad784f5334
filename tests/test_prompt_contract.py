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
