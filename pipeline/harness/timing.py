"""Timing inside the worker: CUDA events + device-wide synchronize, an L2 flush before each call,
warm-ups, interleaved reference/candidate(/compile) rounds on input sets that do not move, adaptive
stopping on the confidence interval of the speedup, a wall-clock cross-check, and a speed-of-light
floor from bytes moved and FLOPs.

How one sample is taken (:func:`time_interleaved`):

* **pre-queued** (a GPU-bound forward, host enqueue time below the GPU time): synchronize, flush L2
  (its own kernel, outside the events), then a spin kernel (``torch.cuda._sleep``) holds the stream
  while the host queues start event, forward and end event behind it. The events then measure the
  forward's GPU time without the launch latency and host jitter that a forward started from an idle
  GPU carries (for a 50-500 us forward that jitter was most of its IQR). A sample is the GPU time,
  floored at the forward's median host enqueue time (over the warm-ups, then over every round): a
  forward whose launches cost more than its kernels is never measured faster than it can be called,
  and one slow enqueue (the box's other work) does not turn into a slow sample.
* **plain** (host-bound or synchronizing forwards): synchronize, flush, start event, forward, end
  event, synchronize: the host time is in the sample, as it is for the user. A host-bound forward
  shorter than ``BATCH_TARGET_MS`` is called up to ``MAX_BATCH`` times back to back between the
  events and the sample is their mean (``method`` ``plain x4``, say): its cost is the host's, and one
  call's host time carries the box's scheduling jitter (27-62 % IQR for torch.compile's forwards under
  0.4 ms on an H100) that a mean over several calls divides. Only the first call starts from a flushed
  L2, which does not change a host-bound forward's time.

Rounds alternate the order of the functions. From round ``min_trials`` on, every 10 rounds, the 95 %
bootstrap interval of each speedup (``median(baseline) / median(candidate)`` over resampled paired
rounds, which keeps what the interleaving shares) is computed; rounds stop once every interval is
within ``ci_target`` of its estimate, when the budget of GPU time is used, or at ``trials``.
The side-stream wall check is taken apart, on plain samples (a spin kernel would hide work that a
candidate starts on another stream).

The functions used for timing are bound when this module is imported (before any candidate), so a
candidate that replaces ``torch.cuda.Event`` or ``time.perf_counter`` does not change our clock.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

_Event = torch.cuda.Event
_sync = torch.cuda.synchronize
_perf = time.perf_counter
_spin = getattr(torch.cuda, "_sleep", None)

#: H200 ceilings (measured copy bandwidth, fp32 SIMT ~60 TFLOP/s); used only when the device is unknown
PEAK_BYTES_PER_S = 4.3e12
PEAK_FLOPS = {"float32": 60e12, "float16": 790e12, "bfloat16": 790e12, "float64": 60e12}
#: dense TF32 tensor-core peak (H200): error-compensated TF32 (three MMAs per product, fp32-level accuracy)
#: reaches a third of it, so a correct fp32 result can come faster than the FFMA peak allows
PEAK_TF32_FLOPS = 495e12

#: a forward is pre-queued when its host enqueue time is below this share of its GPU time
PREQUEUE_HOST_SHARE = 0.8
#: plain samples per function for the side-stream wall check
WALL_CHECK_SAMPLES = 8
#: a host-bound plain forward is called back to back until a sample spans about this long ...
BATCH_TARGET_MS = 1.0
#: ... in at most this many calls
MAX_BATCH = 8
#: bootstrap resamples for the interval that is reported (the stopping rule uses fewer)
BOOTSTRAP = 2000


def fp32_accurate_flops(fp32_flops: float, tf32_flops: float | None) -> float:
    """The fastest rate at which fp32-accurate results can honestly be computed: the FFMA peak, or a third of
    the TF32 tensor-core peak (error-compensated TF32), whichever is higher."""
    return max(fp32_flops, (tf32_flops or 0.0) / 3)


@dataclass
class Samples:
    """One function's samples: ``event_ms`` (what is reported), ``wall_ms`` (plain samples for the wall
    check, with their ``wall_event_ms``), how they were taken."""

    event_ms: list[float]
    wall_ms: list[float]
    wall_event_ms: list[float] = field(default_factory=list)
    method: str = "plain"
    host_ms: float = 0.0  # median host enqueue time measured in the warm-ups
    stop: str = ""
    gpu_ms: list[float] = field(default_factory=list)  # pre-queued: each sample's GPU time ...
    enqueue_ms: list[float] = field(default_factory=list)  # ... and its host enqueue time
    batch: int = 1  # plain: calls per sample

    def host_floor(self) -> float:
        """The median host enqueue time so far (the warm-ups' until there are rounds)."""
        return statistics.median(self.enqueue_ms) if self.enqueue_ms else self.host_ms

    def add_queued(self, gpu_ms: float, host_ms: float) -> None:
        self.gpu_ms.append(gpu_ms)
        self.enqueue_ms.append(host_ms)
        self.event_ms.append(max(gpu_ms, self.host_floor()))

    def refloor(self) -> None:
        """After the rounds: every pre-queued sample floored at the median enqueue time of them all."""
        if self.gpu_ms:
            floor = self.host_floor()
            self.event_ms = [max(g, floor) for g in self.gpu_ms]

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = summarize(self.event_ms)
        if self.wall_ms:
            out["wall_median_ms"] = statistics.median(self.wall_ms)
        out["method"] = self.method
        return out


def summarize(values: Sequence[float]) -> dict[str, float]:
    vals = sorted(values)
    n = len(vals)
    q = statistics.quantiles(vals, n=4) if n >= 2 else [vals[0]] * 3
    return {"median_ms": statistics.median(vals), "iqr_ms": q[2] - q[0], "mean_ms": statistics.fmean(vals),
            "min_ms": vals[0], "trials": n}


def median_ratio_ci(num: Sequence[float], den: Sequence[float], *, resamples: int = BOOTSTRAP,
                    seed: int = 0) -> tuple[float, float, float]:
    """(estimate, lo, hi): ``median(num) / median(den)`` and its 95 % percentile-bootstrap interval.

    ``num[i]`` and ``den[i]`` come from the same interleaved round, so rounds are resampled as pairs (what
    a round shares, such as a clock change, cancels in the ratio). Deterministic for a given seed."""
    n = min(len(num), len(den))
    if n == 0:
        raise ValueError("median_ratio_ci: no samples")
    a = torch.tensor(list(num[:n]), dtype=torch.float64)
    b = torch.tensor(list(den[:n]), dtype=torch.float64)
    est = float(a.median() if n % 2 else a.quantile(0.5)) / float(b.median() if n % 2 else b.quantile(0.5))
    if n < 3:
        return est, est, est
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, n, (resamples, n), generator=gen)
    ratios = a[idx].quantile(0.5, dim=1) / b[idx].quantile(0.5, dim=1)
    lo, hi = ratios.quantile(torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return est, min(lo, est), max(hi, est)


def ci_half_width(est: float, lo: float, hi: float) -> float:
    """The larger side of an interval, relative to its estimate (0.01 = +-1 %)."""
    return max(est - lo, hi - est) / est if est > 0 else math.inf


class L2Flusher:
    """Writes a buffer larger than L2 (256 MB by default) so every timed call starts cold."""

    def __init__(self, device: torch.device, mb: int = 256) -> None:
        self.buf = torch.empty(mb * 2**20 // 4, dtype=torch.int32, device=device) if mb > 0 else None

    def __call__(self) -> None:
        if self.buf is not None:
            self.buf.zero_()


_CYCLES_PER_MS: list[float] = []


def spin_cycles_per_ms() -> float:
    """Clock cycles of ``torch.cuda._sleep`` per millisecond on this GPU (measured once per process)."""
    if not _CYCLES_PER_MS:
        if _spin is None:
            _CYCLES_PER_MS.append(0.0)
            return 0.0
        s, e = _Event(enable_timing=True), _Event(enable_timing=True)
        _spin(1000)  # load the kernel
        _sync()
        best = math.inf
        for _ in range(3):
            s.record()
            _spin(2_000_000)
            e.record()
            _sync()
            best = min(best, s.elapsed_time(e))
        _CYCLES_PER_MS.append(2_000_000 / best if best > 0 else 0.0)
    return _CYCLES_PER_MS[0]


def _plain(fn: Callable[[Sequence[Any]], Any], inputs: Sequence[Any], flusher: L2Flusher,
           start: Any, end: Any, calls: int = 1) -> tuple[float, float]:
    """(event ms, wall ms) per call of ``calls`` back-to-back calls started from an idle, flushed GPU."""
    _sync()
    flusher()
    _sync()
    t0 = _perf()
    start.record()
    out = None
    for _ in range(calls):
        out = None  # one output alive at a time; the last one is freed outside the timed span
        out = fn(inputs)
    end.record()
    _sync()
    t1 = _perf()
    del out
    return start.elapsed_time(end) / calls, (t1 - t0) * 1e3 / calls


def _queued(fn: Callable[[Sequence[Any]], Any], inputs: Sequence[Any], flusher: L2Flusher, start: Any,
            end: Any, cycles: int) -> tuple[float, float]:
    """(GPU ms, host enqueue ms) of one call queued behind a spin kernel after the flush."""
    _sync()
    flusher()
    _spin(cycles)  # type: ignore[misc]
    t0 = _perf()
    start.record()
    out = fn(inputs)
    end.record()
    t1 = _perf()
    _sync()
    del out
    return start.elapsed_time(end), (t1 - t0) * 1e3


def _warm(fn: Callable[[Sequence[Any]], Any], inputs: Sequence[Any], warmup: int, flusher: L2Flusher,
          start: Any, end: Any) -> tuple[float, float]:
    """Warm-ups (lazy JIT, autotuning, clocks) and (median GPU ms, median host enqueue ms) of the last ones."""
    for _ in range(max(1, warmup)):
        fn(inputs)
    _sync()
    gpu, host = [], []
    for _ in range(3):
        _sync()
        flusher()
        _sync()
        t0 = _perf()
        start.record()
        out = fn(inputs)
        end.record()
        t1 = _perf()
        _sync()
        del out
        gpu.append(start.elapsed_time(end))
        host.append((t1 - t0) * 1e3)
    return statistics.median(gpu), statistics.median(host)


def time_interleaved(
    fns: dict[str, Callable[[Sequence[Any]], Any]],
    input_sets: dict[str, list[Sequence[Any]]],
    *,
    trials: int,
    warmup: int,
    flusher: L2Flusher,
    budget_s: float | None = None,
    min_trials: int = 10,
    pairs: Sequence[tuple[str, str]] = (),
    ci_target: float | None = None,
    prequeue: bool = True,
    wall_check: bool = True,
    setup: dict[str, Callable[[], None]] | None = None,
) -> dict[str, Samples]:
    """Time each fn in interleaved rounds (order alternating), each on its own input set (``input_sets[name][0]``).

    Stops after ``trials`` rounds, or from ``min_trials`` on when the slowest function's samples add up to
    ``budget_s`` of GPU time, or when each ``(baseline, candidate)`` pair's speedup interval is within
    ``ci_target`` (checked every 10 rounds). ``setup[name]`` runs before each of that function's calls,
    outside the timed span (it applies the backend settings the function is timed under). See the module
    docstring for how a sample is taken; each function's ``stop`` says why the rounds ended.
    """
    gc_was_on = gc.isenabled()
    gc.disable()  # a collection in the middle of a sample is host jitter, not the forward's cost
    try:
        return _rounds(fns, input_sets, trials=trials, warmup=warmup, flusher=flusher, budget_s=budget_s,
                       min_trials=min_trials, pairs=pairs, ci_target=ci_target, prequeue=prequeue,
                       wall_check=wall_check, setup=setup or {})
    finally:
        if gc_was_on:
            gc.enable()


def _rounds(fns: dict[str, Callable[[Sequence[Any]], Any]], input_sets: dict[str, list[Sequence[Any]]], *,
            trials: int, warmup: int, flusher: L2Flusher, budget_s: float | None, min_trials: int,
            pairs: Sequence[tuple[str, str]], ci_target: float | None, prequeue: bool, wall_check: bool,
            setup: dict[str, Callable[[], None]]) -> dict[str, Samples]:
    names = list(fns)
    hooks = setup

    def ready(name: str) -> None:
        if name in hooks:
            hooks[name]()

    start_ev = _Event(enable_timing=True)
    end_ev = _Event(enable_timing=True)
    samples = {n: Samples([], []) for n in names}
    cycles: dict[str, int] = {}
    per_ms = spin_cycles_per_ms() if prequeue else 0.0
    for name in names:
        ready(name)
        gpu_ms, host_ms = _warm(fns[name], input_sets[name][0], warmup, flusher, start_ev, end_ev)
        samples[name].host_ms = host_ms
        if per_ms > 0 and host_ms < PREQUEUE_HOST_SHARE * gpu_ms:
            # hold the stream for twice the enqueue time (at least 50 us, at most 50 ms)
            cycles[name] = int(per_ms * min(50.0, max(0.05, 2 * host_ms)))
            samples[name].method = "prequeued"
        elif host_ms > gpu_ms and max(host_ms, gpu_ms) < BATCH_TARGET_MS:
            calls = min(MAX_BATCH, max(1, math.ceil(BATCH_TARGET_MS / max(host_ms, gpu_ms, 1e-3))))
            samples[name].batch = calls
            samples[name].method = f"plain x{calls}" if calls > 1 else "plain"
    stop = f"max rounds ({trials})"
    for i in range(trials):
        if i >= min_trials:
            if budget_s is not None and max(sum(s.event_ms) for s in samples.values()) >= budget_s * 1e3:
                stop = f"time budget ({budget_s:g} s of GPU time)"
                break
            if ci_target is not None and pairs and (i - min_trials) % 10 == 0 and all(
                    ci_half_width(*median_ratio_ci(samples[b].event_ms, samples[c].event_ms, resamples=400))
                    <= ci_target for b, c in pairs):
                stop = f"speedup interval within +-{ci_target:.1%}"
                break
        if i % 25 == 24:
            gc.collect()  # between rounds, outside any timed span: outputs caught in reference cycles go
        order = names if i % 2 == 0 else list(reversed(names))
        for name in order:
            ready(name)
            inputs = input_sets[name][i % len(input_sets[name])]
            if name in cycles:
                gpu_ms, host_ms = _queued(fns[name], inputs, flusher, start_ev, end_ev, cycles[name])
                samples[name].add_queued(gpu_ms, host_ms)
            else:
                ev_ms, _ = _plain(fns[name], inputs, flusher, start_ev, end_ev, samples[name].batch)
                samples[name].event_ms.append(ev_ms)
    if wall_check:
        for i in range(WALL_CHECK_SAMPLES):
            for name in names if i % 2 == 0 else reversed(names):
                ready(name)
                ev_ms, wall_ms = _plain(fns[name], input_sets[name][0], flusher, start_ev, end_ev)
                samples[name].wall_ms.append(wall_ms)
                samples[name].wall_event_ms.append(ev_ms)
    for s in samples.values():
        s.refloor()
        s.stop = stop
    return samples


def copy_bandwidth_tb_s(device: torch.device, mb: int = 256, reps: int = 5) -> float:
    """Measured device-to-device copy bandwidth (read + write bytes per second, best of ``reps``), TB/s."""
    n = mb * 2**20 // 4
    a = torch.empty(n, dtype=torch.float32, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    _sync()
    s, e = _Event(enable_timing=True), _Event(enable_timing=True)
    best = math.inf
    for _ in range(reps):
        s.record()
        b.copy_(a)
        e.record()
        _sync()
        best = min(best, s.elapsed_time(e))
    del a, b
    return 2 * n * 4 / (best / 1e3) / 1e12 if best > 0 else 0.0


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
    gap_c = statistics.median([w - e for w, e in zip(cand.wall_ms, cand.wall_event_ms or cand.event_ms, strict=True)])
    gap_r = statistics.median([w - e for w, e in zip(ref.wall_ms, ref.wall_event_ms or ref.event_ms, strict=True)])
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
