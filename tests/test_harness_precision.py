"""``--precision`` in the harness, on the CPU device with real worker processes: a bf16 run casts the task's
floating inputs, init inputs, weights and buffers (integer inputs keep their dtype), holds the output to the
protocol's bf16 tolerance, skips the fp32-only float64 check, and fails a candidate whose output keeps fp32 with a
message naming the dtypes. The precision is on every config and result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.harness import EvalConfig, EvalJob, EvalResult, LocalEvaluator
from kernelskill.pipeline.harness.config import eval_config
from kernelskill.pipeline.harness.evaluation import (
    CAST_DTYPES,
    _to_device,
    _to_precision,
    floor_dtype,
    task_dtype_name,
)
from kernelskill.pipeline.harness.gpu_facts import gpu_facts
from kernelskill.protocols import PRECISIONS, check_precision, load_protocol

CASES = Path(__file__).parent / "harness_cases"
TASK = str(CASES / "tasks" / "precision_mix.py")
FLOAT_OUT = str(CASES / "tasks" / "precision_float_out.py")

#: tag -> (task, precision, candidate)
JOBS = {
    "bf16_ok": (TASK, "bf16", "precision_fp32_math"),
    "bf16_fp32_output": (TASK, "bf16", "precision_fp32_output"),
    "fp32_not_cast": (TASK, "fp32", "precision_fp32_math"),
    "bf16_float_out": (FLOAT_OUT, "bf16", "precision_float_out"),
    "fp16_float_out": (FLOAT_OUT, "fp16", "precision_float_out"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("precision-cache"))
    jobs = []
    for tag, (task, precision, candidate) in JOBS.items():
        cfg = EvalConfig.from_protocol("kernelbench", precision=precision, cache_dir=cache, timing_trials=5,
                                       warmup=1, correctness_trials=3)
        jobs.append(EvalJob(task, str(CASES / "cpu" / f"{candidate}.py"), cfg, tag=tag))
    return {r.details["tag"]: r for r in LocalEvaluator(gpus=[], slots_per_gpu=2).submit(jobs)}


def test_bf16_casts_inputs_weights_buffers_and_init_inputs(results):
    res = results["bf16_ok"]
    # the candidate raises unless x, the weight, the buffer and the init input are bf16 and the index is int64
    assert res.status == "ok", res.message
    assert res.precision == "bf16" and res.details["precision"] == "bf16"
    assert res.details["task_dtype"] == "bf16"
    json.loads(res.to_json())


def test_bf16_is_judged_by_the_protocols_bf16_tolerance(results):
    res = results["bf16_ok"]
    tol = res.details["tolerance"]
    assert tol == {"dtype": "bfloat16", "atol": 1e-2, "rtol": 1e-2}
    assert tuple(tol[k] for k in ("atol", "rtol")) == load_protocol("kernelbench").tolerance("bfloat16")
    # computed in fp32 and rounded once: bf16-sized differences, accepted here, far beyond fp32's 1e-4
    assert res.details["errors"]["max_abs_err"] > 1e-4
    assert res.details["fp64_check"].startswith("skipped: the task runs in bf16")
    assert "fp64_error" not in res.details


def test_a_fp32_output_of_bf16_work_is_held_to_the_precisions_tolerance(results):
    res = results["bf16_float_out"]
    assert res.status == "ok", res.message
    assert res.details["task_dtype"] == "mixed"  # bf16 inputs, a float32 output
    assert res.details["tolerance"] == {"dtype": "float32", "atol": 1e-2, "rtol": 1e-2}
    assert res.details["errors"]["max_abs_err"] > 1e-4  # would fail fp32's own tolerance
    half = results["fp16_float_out"]  # the same in fp16: its own tolerance (1e-2 in both presets)
    assert half.status == "ok" and half.precision == "fp16" and half.details["precision"] == "fp16", half.message
    assert half.details["tolerance"] == {"dtype": "float32", "atol": 1e-2, "rtol": 1e-2}


def test_fp32_output_in_a_bf16_task_fails_clearly(results):
    res = results["bf16_fp32_output"]
    assert res.status == "mismatch" and res.details["check"] == "dtype"
    assert "dtype float32 != reference bfloat16" in res.message
    assert "the task runs in bf16" in res.message


def test_fp32_precision_leaves_the_task_as_written(results):
    res = results["fp32_not_cast"]
    assert res.status == "runtime_error" and "arrived as torch.float32" in res.message
    assert res.precision == "fp32"


def test_precision_values_and_errors():
    assert PRECISIONS == ("fp32", "bf16", "fp16")
    assert check_precision(None) == "fp32"
    with pytest.raises(KernelskillError, match="'fp8' is not a precision; one of fp32, bf16, fp16"):
        check_precision("fp8")
    with pytest.raises(KernelskillError, match="EvalConfig.precision"):
        EvalConfig(precision="float16")
    cfg = EvalConfig(precision="fp16")
    assert EvalConfig.from_dict(json.loads(cfg.to_json())) == cfg and cfg.precision_dtype == "float16"
    # the one settings mapper carries the settings' precision; an argument wins
    assert eval_config({"precision": "bf16"}).precision == "bf16"
    assert eval_config({"precision": "bf16"}, precision="fp16").precision == "fp16"
    assert EvalResult.from_dict({"status": "ok"}).precision == ""  # a result written before the field


def test_task_dtype_names_and_the_floor_dtype():
    assert task_dtype_name({torch.bfloat16}) == "bf16" and task_dtype_name({torch.float16}) == "fp16"
    assert task_dtype_name({torch.float32}) == "fp32" and task_dtype_name({torch.float32, torch.bfloat16}) == "mixed"
    assert floor_dtype("bf16", "mixed") == "bfloat16" and floor_dtype("fp16", "fp16") == "float16"
    assert floor_dtype("fp32", "fp32") == "float32" and floor_dtype("fp32", "fp16") == "float16"
    assert floor_dtype("fp32", "mixed") == "bfloat16"
    h100 = gpu_facts("NVIDIA H100 80GB HBM3")
    assert h100["fp16_tflops"] == h100["bf16_tflops"] > h100["tf32_tflops"] > h100["fp32_tflops"]


def test_the_cast_helpers_touch_floating_tensors_only():
    """What a bf16 / fp16 evaluation does to a task's values and models, in both dtypes."""
    assert CAST_DTYPES == {"bf16": torch.bfloat16, "fp16": torch.float16}
    cpu = torch.device("cpu")
    for dtype in CAST_DTYPES.values():
        x, idx, mask = torch.rand(3, 4), torch.arange(3), torch.ones(3, dtype=torch.bool)
        out = _to_device([x, idx, mask, 7, 0.5], cpu, dtype)
        assert [v.dtype for v in out[:3]] == [dtype, torch.int64, torch.bool] and out[3:] == [7, 0.5]
        assert torch.equal(out[0], x.to(dtype))  # the same values the fp32 inputs round to
        model = torch.nn.BatchNorm1d(4)  # float weight, bias and running stats; an int64 batch counter
        moved = _to_precision(model, cpu, dtype)
        assert {p.dtype for p in moved.parameters()} == {dtype}
        assert moved.running_mean.dtype == dtype and moved.num_batches_tracked.dtype == torch.int64
    assert _to_device([torch.rand(2)], cpu, None)[0].dtype == torch.float32  # fp32: the task as written
    assert _to_precision("not a module", cpu, torch.bfloat16) == "not a module"
