"""The statistics behind every speedup's interval (issue 28 item 1): the bootstrap over paired rounds, and the
noise figures of benchmarks/timing_noise.py read from run results with the standard library."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from kernelskill.pipeline.harness import timing

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _noise_module():
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("timing_noise", BENCH / "timing_noise.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _paired(n: int, ratio: float, noise: float, seed: int = 1) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    base, cand = [], []
    for _ in range(n):
        clock = rng.uniform(0.97, 1.03)  # what a round shares (clocks), cancelled by pairing
        base.append(ratio * clock * (1 + rng.gauss(0, noise)))
        cand.append(clock * (1 + rng.gauss(0, noise)))
    return base, cand


def test_interval_holds_the_estimate_and_is_deterministic():
    base, cand = _paired(60, 2.0, 0.01)
    est, lo, hi = timing.median_ratio_ci(base, cand)
    assert lo <= est <= hi and lo < 2.0 < hi
    assert timing.median_ratio_ci(base, cand) == (est, lo, hi)


def test_interval_narrows_with_more_rounds():
    w = [timing.ci_half_width(*timing.median_ratio_ci(*_paired(n, 1.3, 0.02))) for n in (20, 80, 320)]
    assert w[0] > w[1] > w[2]


def test_identical_samples_give_a_point_and_few_samples_no_interval():
    assert timing.median_ratio_ci([2.0] * 30, [1.0] * 30) == (2.0, 2.0, 2.0)
    assert timing.median_ratio_ci([3.0, 3.0], [1.0, 1.5])[0] == pytest.approx(3.0 / 1.25)
    with pytest.raises(ValueError):
        timing.median_ratio_ci([], [])


def test_noise_figures_of_results():
    mod = _noise_module()
    results = [{"candidate_ms": 1.0, "candidate_iqr_ms": 0.01 * (i + 1), "baseline_ms": 2.0, "baseline_iqr_ms": 0.02,
                "speedup": 2.0, "speedup_ci": [1.98, 2.04],
                "details": {"timing": {"compile": {"median_ms": 1.5, "iqr_ms": 0.03}}}} for i in range(10)]
    results.append({"candidate_ms": 0.01, "candidate_iqr_ms": 0.005, "baseline_ms": 0.02, "baseline_iqr_ms": 0.001})
    rows, figures = mod.noise_rows(results)
    assert figures["candidate"]["n"] == 10  # the 10 us one is below 50 us: not counted
    assert figures["candidate"]["p50_pct"] == pytest.approx(5.0) and figures["candidate"]["p90_pct"] == pytest.approx(9.0)
    assert figures["eager"]["p50_pct"] == pytest.approx(1.0) and figures["compile"]["p90_pct"] == pytest.approx(2.0)
    assert figures["speedup_ci"]["p50_pct"] == pytest.approx(2.0)


def test_before_reads_the_evaluations_of_nested_run_archives(tmp_path):
    import io
    import json
    import tarfile

    mod = _noise_module()
    events = [{"type": "eval", "data": {"result": {"status": "ok", "candidate_ms": 0.2, "candidate_iqr_ms": 0.002,
                                                   "baseline_ms": 0.4, "baseline_iqr_ms": 0.008}}},
              {"type": "eval", "data": {"result": {"status": "mismatch", "candidate_ms": None}}},
              {"type": "llm_call", "data": {}}]
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as tar:
        body = "\n".join(json.dumps(e) for e in events).encode()
        info = tarfile.TarInfo("001-task/events.jsonl")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    with tarfile.open(tmp_path / "x-runs.tar.gz", "w:gz") as outer:
        info = tarfile.TarInfo("001-task.kernelskill-run.tar.gz")
        info.size = len(inner.getvalue())
        outer.addfile(info, io.BytesIO(inner.getvalue()))
    text, figures = mod.before(tmp_path)
    assert "1 correct evaluations in 1 published suites" in text
    assert figures["candidate"] == {"n": 1, "p50_pct": pytest.approx(1.0), "p90_pct": pytest.approx(1.0)}
    assert figures["eager"]["p50_pct"] == pytest.approx(2.0)


class _Clocks:
    """Stand-ins for the GPU's stream clock (read by events) and the host's clock (read by perf_counter): a
    forward advances each by its own cost, so GPU-bound and host-bound forwards can be told apart on a CPU."""

    def __init__(self) -> None:
        self.gpu = 0.0
        self.host = 0.0

    def event(self, **_: object) -> object:
        clocks = self

        class Event:
            at = 0.0

            def record(self) -> None:
                self.at = clocks.gpu

            def elapsed_time(self, end: Event) -> float:
                return end.at - self.at

        return Event()

    def forward(self, gpu_ms: float, host_ms) -> object:  # host_ms: call number -> ms
        calls = [0]

        def fn(_inputs: object) -> None:
            calls[0] += 1
            self.gpu += gpu_ms
            self.host += host_ms(calls[0])

        return fn


@pytest.fixture
def clocks(monkeypatch) -> _Clocks:
    c = _Clocks()
    monkeypatch.setattr(timing, "_Event", c.event)
    monkeypatch.setattr(timing, "_sync", lambda: None)
    monkeypatch.setattr(timing, "_spin", lambda cycles: None)
    monkeypatch.setattr(timing, "_perf", lambda: c.host / 1e3)
    monkeypatch.setattr(timing, "spin_cycles_per_ms", lambda: 1000.0)
    return c


def test_one_slow_enqueue_does_not_become_a_slow_sample(clocks):
    # GPU-bound: 1 ms of GPU work, 0.1 ms to enqueue, but call 30 took 3 ms on the host (the box was busy)
    fn = clocks.forward(1.0, lambda n: 3.0 if n == 30 else 0.1)
    got = timing.time_interleaved({"f": fn}, {"f": [[]]}, trials=40, warmup=3, flusher=lambda: None,
                                  wall_check=False)["f"]
    assert got.method == "prequeued"
    assert got.event_ms == pytest.approx([1.0] * 40)  # floored at the median enqueue time, not at that call's


def test_a_forward_that_becomes_host_bound_is_floored_at_its_median_enqueue_time(clocks):
    # quick to enqueue in the warm-ups, then 2 ms per call on the host for the rounds: never faster than callable
    fn = clocks.forward(1.0, lambda n: 0.1 if n <= 6 else 2.0)
    got = timing.time_interleaved({"f": fn}, {"f": [[]]}, trials=30, warmup=3, flusher=lambda: None,
                                  wall_check=False)["f"]
    assert got.method == "prequeued" and got.event_ms == pytest.approx([2.0] * 30)


def test_a_short_host_bound_forward_is_timed_over_back_to_back_calls(clocks):
    fn = clocks.forward(0.05, lambda n: 0.2)  # 50 us of GPU work behind 200 us of host work
    slow = clocks.forward(2.0, lambda n: 3.0)  # host-bound but long: one call per sample
    got = timing.time_interleaved({"f": fn, "slow": slow}, {"f": [[]], "slow": [[]]}, trials=20, warmup=3,
                                  flusher=lambda: None, wall_check=False)
    assert got["f"].method == "plain x5" and got["f"].batch == 5  # 1 ms / 0.2 ms per call
    assert len(got["f"].event_ms) == 20 and got["f"].event_ms[0] == pytest.approx(0.05)
    assert got["slow"].method == "plain" and got["slow"].batch == 1
