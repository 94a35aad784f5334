"""Result and configuration records of the harness (plain dataclasses, JSON round-trip).

Standard library only: these records cross process boundaries as JSON and are read by the CLI,
the optimize loop and the run store.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from kernelskill.protocols import (
    DEFAULT_PRECISION,
    DEFAULT_PROTOCOL,
    DEFAULT_TOLERANCES,
    PRECISION_DTYPES,
    Protocol,
    check_precision,
    load_protocol,
)

OK = "ok"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
ILLEGAL_MEMORY_ACCESS = "illegal_memory_access"
TIMEOUT = "timeout"
OOM = "oom"
WRONG_SHAPE = "wrong_shape"
MISMATCH = "mismatch"
NONDETERMINISTIC = "nondeterministic"
CHEAT = "cheat"

#: every status an :class:`EvalResult` may carry (``ok`` first, then the failure classes)
STATUSES: tuple[str, ...] = (
    OK, COMPILE_ERROR, RUNTIME_ERROR, ILLEGAL_MEMORY_ACCESS, TIMEOUT, OOM, WRONG_SHAPE, MISMATCH,
    NONDETERMINISTIC, CHEAT,
)

#: the names of the anti-cheat checks that may appear in ``details["cheat_check"]``
CHEAT_CHECKS: tuple[str, ...] = (
    "torch_compute",  # the whole op computed by torch ops instead of a kernel
    "library_call",  # a cuBLAS/cuDNN-backed aten op while the policy forbids it
    "precision_downcast",  # fp16/bf16/tf32 work inside a fp32 task
    "precision_flags",  # (no longer raised: backend switches are confined to the candidate's calls, numerics.py)
    "timer_patched",  # torch.cuda.Event / time functions replaced
    "background_thread",  # a thread started by the candidate
    "tensor_subclass",  # an output that is not exactly torch.Tensor
    "output_aliases_input",  # an output sharing memory with an input
    "input_mutated",  # the candidate wrote into its inputs (the reference does not)
    "pointer_cache",  # outputs keyed by input pointer (stale after an in-place input change)
    "side_stream",  # work outside the timed stream (CUDA events far below wall time)
    "speed_of_light",  # faster than bytes-moved / FLOPs allow on this GPU
    "forged_result",  # a verdict written by the candidate (a result file, a printed or forged record)
)


#: how the torch.compile baseline is measured (``EvalConfig.compile_baseline``)
COMPILE_BASELINES: tuple[str, ...] = ("once", "inline")


class _Record:
    """``to_dict`` / ``from_dict`` / ``to_json`` for the dataclasses below."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):  # type: ignore[no-untyped-def]
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
        return cls(**data)


@dataclass
class EvalConfig(_Record):
    """How to evaluate one candidate. Every field has a safe default.

    ``protocol`` names the contract (a preset of :mod:`kernelskill.protocols` or a protocol file); it
    decides the tolerances, the library and torch-op policies, TF32 and the second shape set.
    :meth:`from_protocol` fills the fields below from it; ``tolerances``/``atol``/``rtol`` override it.
    """

    protocol: str = DEFAULT_PROTOCOL
    precision: str = DEFAULT_PRECISION  # fp32 | bf16 | fp16: floating inputs, weights, buffers cast to it
    correctness_trials: int = 5
    timing_trials: int = 300  # the most timed rounds (one call of each function per round)
    min_timing_trials: int = 20  # the fewest, whatever the budget or the interval
    timing_budget_s: float = 2.0  # rounds stop when the slowest function has used this much GPU time
    timing_ci: float = 0.01  # rounds stop when each speedup's 95 % interval is within +-this of it
    warmup: int = 3
    seed: int = 42
    tolerances: dict[str, list[float]] = field(default_factory=dict)  # dtype -> [atol, rtol] overrides
    atol: float | None = None  # forces one atol for every dtype
    rtol: float | None = None
    determinism_reruns: int = 3
    alt_shapes: bool = True  # the second shape set (how it varies: ``shapes``)
    shapes: str = "vary_all"  # vary_all | batch_only | none (from the protocol)
    alt_batch_scale: float = 0.5
    check_fp64: bool = True  # precision-downcast check against a float64 reference (fp32 tasks)
    allow_tf32: bool = False  # from the protocol: TF32-level error inside a fp32 task is accepted
    torch_ops: str = "reject"  # reject | warn: torch computing the whole op (from the protocol)
    baseline: str = "eager"  # eager | compile (torch.compile is timed as well)
    # with baseline "compile" on a GPU: once = measured once per task, GPU and software in a worker that runs
    # no candidate, then carried over to each candidate's eager time (compile_baseline.py); inline = torch.compile
    # compiled and timed inside every candidate's worker (the only way on the CPU)
    compile_baseline: str = "once"
    library_policy: str = "forbid"  # forbid | allow_gemm_conv (from the protocol)
    time: bool = True  # time when correct
    build_timeout_s: float = 300.0
    run_timeout_s: float = 180.0
    max_rss_gb: float = 64.0  # host memory watchdog for the worker's process group
    max_file_mb: int = 2048  # RLIMIT_FSIZE for the worker
    cache_dir: str | None = None  # build cache root (default ~/.cache/kernelskill/builds)
    fast_headers: bool = True  # rewrite heavy torch headers of load_inline CUDA units
    prebuild_fastpath: bool = False  # also run fast-path-only candidates through a build worker
    use_pch: bool = False  # precompile torch/extension.h once per box for load_inline host units (opt-in)
    device: int | None = None  # GPU index (LocalEvaluator sets it)
    rotate_inputs: int = 1  # unused: timed inputs do not move between calls (the L2 flush keeps them cold)
    l2_flush_mb: int = 256
    sol_fail_fraction: float = 0.5  # faster than this fraction of the speed-of-light floor => cheat
    side_stream_factor: float = 0.5  # wall-minus-event gap above this share of the wall time => cheat
    keep_workdir: bool = False
    memory_trace: bool = False  # details["memory_trace"]: per stage, the large live CUDA tensors and their holders
    ready_workers: bool = True  # the next GPU worker starts (torch imported, CUDA up) while this one runs

    @classmethod
    def from_protocol(cls, protocol: str | Protocol | None = None, **overrides: Any) -> EvalConfig:
        """A config whose policy fields come from a protocol (a preset name, a file, or a Protocol)."""
        proto = protocol if isinstance(protocol, Protocol) else load_protocol(protocol)
        fields = {"protocol": proto.name, "library_policy": proto.library_policy, "allow_tf32": proto.allow_tf32,
                  "torch_ops": proto.torch_ops, "shapes": proto.shapes,
                  "tolerances": {k: [float(v[0]), float(v[1])] for k, v in proto.tolerances.items()}}
        return cls(**(fields | overrides))

    def __post_init__(self) -> None:
        check_precision(self.precision, "EvalConfig.precision")
        if self.compile_baseline not in COMPILE_BASELINES:
            raise ValueError(f"EvalConfig.compile_baseline: {self.compile_baseline!r} is not one of "
                             f"{', '.join(COMPILE_BASELINES)}")

    @property
    def precision_dtype(self) -> str:
        """The torch dtype name of :attr:`precision` (``float32``, ``bfloat16``, ``float16``)."""
        return PRECISION_DTYPES[self.precision]

    def tolerance(self, dtype: str) -> tuple[float, float]:
        atol, rtol = DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES["float32"])
        if dtype in self.tolerances:
            atol, rtol = self.tolerances[dtype]
        elif "float32" in self.tolerances and dtype not in DEFAULT_TOLERANCES:
            atol, rtol = self.tolerances["float32"]
        return (self.atol if self.atol is not None else atol, self.rtol if self.rtol is not None else rtol)


@dataclass
class BuildResult(_Record):
    ok: bool
    key: str
    cached: bool = False
    seconds: float = 0.0
    log: str = ""
    message: str = ""
    status: str = OK  # ok | compile_error | timeout | runtime_error
    deferred: bool = False  # the candidate's import needs the GPU: built in the GPU phase


@dataclass
class EvalResult(_Record):
    status: str
    correct: bool = False
    speedup: float | None = None
    speedup_ci: list[float] | None = None  # [lo, hi]: 95 % bootstrap interval of the speedup over eager
    compile_speedup_ci: list[float] | None = None  # [lo, hi]: the same for torch.compile's time / the candidate's
    candidate_ms: float | None = None
    baseline_ms: float | None = None
    candidate_iqr_ms: float | None = None
    baseline_iqr_ms: float | None = None
    compile_ms: float | None = None  # torch.compile baseline median (with --baseline compile)
    protocol: str = ""  # the protocol the candidate was judged by
    precision: str = ""  # the precision the task ran in (fp32 | bf16 | fp16); "" in results written before it
    baseline_ieee_ms: float | None = None  # eager with cuDNN TF32 off, when it differs from baseline_ms by > 5 %
    message: str = ""
    build_log: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    task: str = ""
    candidate: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"EvalResult.status: {self.status!r} is not one of {', '.join(STATUSES)}")

    @property
    def cheat_check(self) -> str | None:
        return self.details.get("cheat_check")

    @property
    def harness_failure(self) -> bool:
        """The harness's own limit (an out-of-memory error in its work, or a candidate left too little room),
        not the candidate's fault: ``details["harness_failure"]``."""
        return bool(self.details.get("harness_failure"))


@dataclass
class ProfileResult(_Record):
    ok: bool
    message: str = ""
    csv: str = ""
    rows: list[dict[str, str]] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    isolation: str = ""  # namespaces | process-only: how the profiled candidate was isolated
    #: who the profiler's sandbox's root was on the host (unprivileged where kernelskill runs as root; see
    #: ``isolation.Identity.describe``)
    identity: str = ""
    #: where the seconds went: ``ncu_seconds`` (the profiler's process, start to exit) and the worker's
    #: ``stage_times_s`` inside it (load_task, import_candidate, warmup, profiled_forward: seconds since the
    #: worker started; ``end`` is its last), so ncu's own start-up and replay cost read off the difference
    details: dict[str, Any] = field(default_factory=dict)


def trim_log(text: str, limit: int = 6000) -> str:
    """Keep what a repairer needs from a compiler log: the error lines with context, then the tail."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    keep: list[int] = []
    for i, line in enumerate(lines):
        low = line.lower()
        if "error" in low or "undefined" in low or "fatal" in low:
            keep.extend(range(max(0, i - 2), min(len(lines), i + 3)))
    seen: set[int] = set()
    picked = [lines[i] for i in keep if not (i in seen or seen.add(i))]
    head = "\n".join(picked)[: limit // 2]
    tail = text[-(limit - len(head) - 40):]
    return f"{head}\n... [log trimmed] ...\n{tail}"
