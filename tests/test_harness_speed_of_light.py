"""The speed-of-light floor must not call an honest fp32-accurate route a cheat.

Measured on the H200 (2026-12-03 suite): a 4096^3 fp32 GEMM split into TF32 high and low parts and run as
three TF32 tensor-core products (error-compensated TF32, within atol=rtol=1e-4) took 1.107 ms. The floor
from the FFMA peak alone (137.4 GFLOP at 60 TFLOP/s = 2.29 ms) flagged it as faster than half the floor.
"""

from __future__ import annotations

from kernelskill.pipeline.harness import timing
from kernelskill.pipeline.harness.gpu_facts import gpu_facts

GEMM_FLOPS = 2 * 4096**3
GEMM_BYTES = 3 * 4096 * 4096 * 4


def floor_ms(tf32_tflops: float | None) -> float:
    rate = timing.fp32_accurate_flops(60e12, tf32_tflops * 1e12 if tf32_tflops else None)
    return timing.speed_of_light_ms(GEMM_BYTES, GEMM_FLOPS, "float32", bytes_per_s=4.3e12, flops_per_s=rate)


def test_error_compensated_tf32_gemm_is_not_below_half_the_floor() -> None:
    h200 = gpu_facts("NVIDIA H200")
    assert h200["tf32_tflops"] > h200["fp32_tflops"]
    assert 1.107 >= 0.5 * floor_ms(h200["tf32_tflops"])  # the honest candidate passes
    assert 1.107 < 0.5 * floor_ms(None)  # what the FFMA-only floor said


def test_a_result_returned_without_the_work_is_still_far_below_the_floor() -> None:
    """A cached or skipped GEMM (microseconds) stays a cheat under the raised compute peak."""
    assert 0.02 < 0.5 * floor_ms(gpu_facts("NVIDIA H200")["tf32_tflops"])


def test_the_fp32_rate_never_drops_below_the_ffma_peak() -> None:
    assert timing.fp32_accurate_flops(60e12, None) == 60e12
    assert timing.fp32_accurate_flops(60e12, 90e12) == 60e12
    assert timing.fp32_accurate_flops(60e12, 495e12) == 165e12
