"""Cold builds take a ready worker (torch imported while the previous build ran), with CUDA hidden from it,
and build exactly what a worker started for the job builds."""

from __future__ import annotations

import json
from pathlib import Path

from kernelskill.pipeline.harness import EvalConfig, build, sandbox

CASES = Path(__file__).parent / "harness_cases" / "gpu"


def _ready_build_workers() -> dict[str, int]:
    with sandbox._READY_LOCK:
        return {key: ready.started.proc.pid for key, ready in sandbox._READY.items()
                if json.loads(key).get("CUDA_VISIBLE_DEVICES") == ""}


def test_a_cold_build_leaves_a_ready_worker_and_the_next_build_takes_it(tmp_path: Path) -> None:
    sandbox.stop_ready_workers()
    try:
        first = build(CASES / "good_add_inline.py", EvalConfig(cache_dir=str(tmp_path / "ready")))
        waiting = _ready_build_workers()
        assert len(waiting) == 1  # started with the first build, for the next one; CUDA hidden from it
        second = build(CASES / "bad_inline_compile_error.py", EvalConfig(cache_dir=str(tmp_path / "ready")))
        after = _ready_build_workers()
        assert len(after) == 1 and after != waiting  # the waiting one was taken, a fresh one waits
        cold = EvalConfig(cache_dir=str(tmp_path / "cold"), ready_workers=False)
        for case, got in (("good_add_inline.py", first), ("bad_inline_compile_error.py", second)):
            want = build(CASES / case, cold)
            assert (got.ok, got.status, got.message, got.deferred) == (want.ok, want.status, want.message,
                                                                      want.deferred)
    finally:
        sandbox.stop_ready_workers()
    assert _ready_build_workers() == {}


def test_without_ready_workers_no_build_worker_waits(tmp_path: Path) -> None:
    sandbox.stop_ready_workers()
    build(CASES / "good_add_inline.py", EvalConfig(cache_dir=str(tmp_path), ready_workers=False))
    assert _ready_build_workers() == {}
