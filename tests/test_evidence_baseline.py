"""Evidence with its baseline (issue 31, item 6): every measured worked example says where its before and
after stand against eager PyTorch, consistent with its own times, and the query's summary shows both."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.kb.loader import load_skills
from kernelskill.retrieval.ranking import measured_example
from kernelskill.retrieval.result import MeasuredExample

SKILLS = Path(__file__).resolve().parents[1] / "kb" / "skills"


@pytest.fixture(scope="module")
def methods():
    return load_skills([SKILLS]).methods


def test_every_measurement_carries_eager(methods) -> None:
    measured = [(m.id, e) for m in methods for e in m.measurements()]
    assert measured
    for mid, e in measured:
        assert e.eager_ms and e.before_vs_eager and e.after_vs_eager, mid
        assert e.before_vs_eager == pytest.approx(e.eager_ms / e.before_ms, rel=2e-3), mid
        assert e.after_vs_eager == pytest.approx(e.eager_ms / e.after_ms, rel=2e-3), mid


def test_the_library_example_is_at_eager_not_five_times_faster(methods) -> None:
    cublas = measured_example(next(m for m in methods if m.id == "cublas_gemm"))
    assert cublas.speedup == pytest.approx(5.14, abs=0.01)
    assert cublas.after_vs_eager == pytest.approx(1.0, abs=0.01) and cublas.before_vs_eager < 0.25
    assert "before 0.20x, after 1.00x of eager" in cublas.summary()


def test_summary_without_a_baseline_says_only_the_speedup() -> None:
    m = MeasuredExample(speedup=1.5, hardware="NVIDIA H100", date="2026-12-07")
    assert m.summary() == "1.50x over its before on NVIDIA H100, 2026-12-07"
