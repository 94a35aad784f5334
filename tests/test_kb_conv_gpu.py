"""GPU check of the conv worked examples (torch + triton + the standard library, so it runs on a bare GPU box):
the error-compensated cuDNN convolution and the fused GroupNorm tail keep fp32 accuracy against float64, and
plain TF32 (eager PyTorch's default for convolutions) does not. Skipped without CUDA.

    python3 -m pytest -q tests/test_kb_conv_gpu.py
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "ec_tf32_conv_accuracy.py"
HARNESS_FP64_BOUND = 32  # the harness's float64 check: a candidate's error within 32x the fp32 reference's


def _bench():
    spec = importlib.util.spec_from_file_location("kb_conv_bench_gpu", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.gpu
def test_conv_examples_keep_fp32_accuracy_where_plain_tf32_does_not() -> None:
    bench = _bench()
    ec = bench._load(bench.EXAMPLES / "ec_tf32_library_conv" / "after.py", "kb_conv_ec_helpers_gpu")
    timer = bench.Timer(3)
    for method in bench.EXAMPLE_METHODS:
        result = bench.measure_example(method, timer, ec)
        for label, rows in result["inputs"].items():
            failed = {k: r["error"] for k, r in rows.items() if "error" in r}
            assert not failed, (method, label, failed)
            for name in ("before", "after", *(["after+ec"] if "after+ec" in rows else [])):
                r = rows[name]
                assert r["allclose_1e-4_vs_fp32_ref"], (method, label, name, r)
                assert r["err_vs_fp32_ref_err"] <= HARNESS_FP64_BOUND, (method, label, name, r)
        if method == "ec_tf32_library_conv":
            rows = result["inputs"]["task_rand"]
            # plain TF32 is an order of magnitude off where the compensated split is not
            assert rows["eager_tf32"]["max_abs_err"] > 4 * rows["after"]["max_abs_err"], rows
