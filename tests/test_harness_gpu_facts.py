"""The GPU the prompts describe is the GPU that evaluates (issue 28 item 4): the last evaluation's measured facts
win over the table's, a move to another card is said, and gpus.json knows the H100 80GB HBM3."""

from __future__ import annotations

from kernelskill.pipeline.harness.gpu_facts import gpu_facts, prompt_gpu
from kernelskill.pipeline.loop.agents import render

H100_MEASURED = {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "sm_count": 132, "l2_mb": 50.0,
                 "memory_gb": 85.0, "copy_tb_s": 2.91, "source": "measured on the evaluating device"}


def test_the_h100_80gb_hbm3_is_in_the_table():
    h100 = gpu_facts("NVIDIA H100 80GB HBM3")
    assert (h100["sm_count"], h100["l2_mb"], h100["memory_gb"], h100["hbm_peak_tb_s"]) == (132, 50, 80, 3.35)
    assert gpu_facts("NVIDIA H200")["hbm_peak_tb_s"] == 4.8


def test_the_last_evaluations_device_wins_over_the_arch_default():
    gpu = prompt_gpu("sm_90", evaluated=H100_MEASURED)
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["measured"] is True
    assert gpu["copy_tb_s"] == 2.91 and gpu["l2_mb"] == 50.0 and gpu["memory_gb"] == 85.0
    assert gpu["hbm_peak_tb_s"] == 3.35  # the data sheet fills what is not measured
    assert "moved_from" not in gpu
    assert prompt_gpu("sm_90")["name"] == "NVIDIA H200"  # no evaluation yet: the arch's default


def test_a_run_moved_to_another_card_says_so_and_the_prompt_states_the_measured_facts():
    gpu = prompt_gpu("sm_90", evaluated=H100_MEASURED, previous={"name": "NVIDIA H200"})
    assert gpu["moved_from"] == "NVIDIA H200"
    text = render("partials/gpu.j2", gpu=gpu)
    assert "NVIDIA H100 80GB HBM3 (sm_90)" in text
    assert "132 SMs, 50.0 MB L2, 85.0 GB memory, 2.91 TB/s for a device copy" in text
    assert "moved from NVIDIA H200" in text
    assert "4.3" not in text and "141" not in text  # no H200 constant


def test_without_measured_facts_the_header_is_as_before():
    assert render("partials/gpu.j2", gpu={"name": "NVIDIA H200", "arch": "sm_90", "notes": ""}).strip() == \
        "## Target GPU\nNVIDIA H200 (sm_90)"


def test_the_speed_of_light_floor_divides_by_the_evaluating_devices_bandwidth():
    from kernelskill.pipeline.harness.evaluation import floor_bandwidth

    h100 = gpu_facts("NVIDIA H100 80GB HBM3")
    assert floor_bandwidth(H100_MEASURED, h100) == 3.0e12  # the table's copy figure is higher: the lower floor
    assert floor_bandwidth(H100_MEASURED | {"copy_tb_s": 3.1}, h100) == 3.1e12  # measured higher: measured
    assert floor_bandwidth({"copy_tb_s": 1.2}, {}) == 1.2e12  # an unknown card: what it measured
    assert floor_bandwidth({}, {}) == 4.3e12  # nothing known: the H200 default
