"""Timing inside the worker: CUDA events + device-wide synchronize, L2 flush before each call,
warm-ups, interleaved reference/candidate calls on rotated input copies, a wall-clock cross-check,
and a speed-of-light floor from bytes moved and FLOPs.

The functions used for timing are bound when this module is imported (before any candidate), so a
candidate that replaces ``torch.cuda.Event`` or ``time.perf_counter`` does not change our clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

_Event = torch.cuda.Event
_sync = torch.cuda.synchronize
_perf = time.perf_counter

#: H200 ceilings (measured copy bandwidth, fp32 SIMT ~60 TFLOP/s); gpus.json holds other GPUs
PEAK_BYTES_PER_S = 4.3e12
PEAK_FLOPS = {"float32": 60e12, "float16": 790e12, "bfloat16": 790e12, "float64": 60e12}
#: dense TF32 tensor-core peak (H200): error-compensated TF32 (three MMAs per product, fp32-level accuracy)
#: reaches a third of it, so a correct fp32 result can come faster than the FFMA peak allows
PEAK_TF32_FLOPS = 495e12


def fp32_accurate_flops(fp32_flops: float, tf32_flops: float | None) -> float:
    """The fastest rate at which fp32-accurate results can honestly be computed: the FFMA peak, or a third of
    the TF32 tensor-core peak (error-compensated TF32), whichever is higher."""
    return max(fp32_flops, (tf32_flops or 0.0) / 3)


@dataclass
class Samples:
    event_ms: list[float]
    wall_ms: list[float]

    def summary(self) -> dict[str, float]:
        return summarize(self.event_ms) | {"wall_median_ms": statistics.median(self.wall_ms)}


def summarize(values: Sequence[float]) -> dict[str, float]:
    vals = sorted(values)
    n = len(vals)
    q = statistics.quantiles(vals, n=4) if n >= 2 else [vals[0]] * 3
    return {"median_ms": statistics.median(vals), "iqr_ms": q[2] - q[0], "mean_ms": statistics.fmean(vals),
            "min_ms": vals[0], "trials": n}


class L2Flusher:
    """Writes a buffer larger than L2 (256 MB by default) so every timed call starts cold."""

    def __init__(self, device: torch.device, mb: int = 256) -> None:
        self.buf = torch.empty(mb * 2**20 // 4, dtype=torch.int32, device=device) if mb > 0 else None

    def __call__(self) -> None:
        if self.buf is not None:
            self.buf.zero_()


def time_interleaved(
    fns: dict[str, Callable[[Sequence[Any]], Any]],
    input_sets: dict[str, list[Sequence[Any]]],
    *,
    trials: int,
    warmup: int,
    flusher: L2Flusher,
    budget_s: float | None = None,
    min_trials: int = 10,
) -> dict[str, Samples]:
    """Time each fn up to ``trials`` times, alternating the order every round, cycling through its inputs.

    With ``budget_s``, rounds stop once ``min_trials`` are done and the slowest function's timed calls
    (wall clock) add up to the budget: a 50 ms forward gets ~40 calls, a 50 us one all ``trials``.
    """
    names = list(fns)
    for name in names:  # warm-ups (and lazy JIT of Triton / torch.compile)
        for w in range(max(1, warmup)):
            fns[name](input_sets[name][w % len(input_sets[name])])
    _sync()
    samples = {n: Samples([], []) for n in names}
    start_ev = _Event(enable_timing=True)
    end_ev = _Event(enable_timing=True)
    for i in range(trials):
        if budget_s is not None and i >= min_trials and \
                max(sum(s.wall_ms) for s in samples.values()) >= budget_s * 1e3:
            break
        order = names if i % 2 == 0 else list(reversed(names))
        for name in order:
            inputs = input_sets[name][i % len(input_sets[name])]
            flusher()
            _sync()
            t0 = _perf()
            start_ev.record()
            out = fns[name](inputs)
            end_ev.record()
            _sync()
            t1 = _perf()
            samples[name].event_ms.append(start_ev.elapsed_time(end_ev))
            samples[name].wall_ms.append((t1 - t0) * 1e3)
            del out
    return samples


def time_kernelbench(fn: Callable[[Sequence[Any]], Any], inputs: Sequence[Any], *, trials: int = 100,
                     warmup: int = 3, flusher: L2Flusher) -> dict[str, float]:
    """KernelBench's protocol: 3 warm-ups, ``trials`` timed calls with L2 flush, mean reported."""
    for _ in range(warmup):
        fn(inputs)
    _sync()
    times = []
    for _ in range(trials):
        flusher()
        _sync()
        s = _Event(enable_timing=True)
        e = _Event(enable_timing=True)
        s.record()
        fn(inputs)
        e.record()
        _sync()
        times.append(s.elapsed_time(e))
    return summarize(times)


def side_stream_suspect(cand: Samples, ref: Samples, factor: float) -> tuple[bool, dict[str, float]]:
    """Events on the current stream far below wall time (beyond the reference's gap): hidden work.

    With a device-wide synchronize, an honest candidate's wall-minus-event gap is the fixed cost of
    recording the end event and returning from synchronize, whatever its host overhead (host-bound
    work stretches the event span too). Work on another stream is outside the events but inside the
    wall time, so the gap grows by the hidden work.
    """
    gap_c = statistics.median([w - e for w, e in zip(cand.wall_ms, cand.event_ms, strict=True)])
    gap_r = statistics.median([w - e for w, e in zip(ref.wall_ms, ref.event_ms, strict=True)])
    wall_c = statistics.median(cand.wall_ms)
    info = {"gap_candidate_ms": gap_c, "gap_reference_ms": gap_r, "wall_candidate_ms": wall_c}
    suspect = gap_c > max(3 * gap_r, gap_r + 0.05) and gap_c > factor * wall_c
    return suspect, info


def speed_of_light_ms(bytes_moved: int, flops: float, dtype: str, *, bytes_per_s: float | None = None,
                      flops_per_s: float | None = None) -> float:
    """Lower bound on a forward's time: max(bytes / copy bandwidth, FLOPs / peak); H200 figures by default."""
    t_mem = bytes_moved / (bytes_per_s or PEAK_BYTES_PER_S)
    t_flop = flops / (flops_per_s or PEAK_FLOPS.get(dtype, PEAK_FLOPS["float32"])) if flops else 0.0
    return max(t_mem, t_flop) * 1e3


def tensor_bytes(values: Sequence[Any]) -> int:
    total = 0
    for v in values:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, tuple | list):
            total += tensor_bytes(v)
    return total


def count_flops(fn: Callable[[], Any]) -> float:
    """FLOPs of one call by torch's flop counter (matmul/conv/attention); 0 when unavailable."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            fn()
        return float(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - optional estimate
        return 0.0
