"""The GPU phase of one candidate, run inside a worker process (see :mod:`.worker`).

Order: device facts (name, SMs, L2, memory, a measured copy bandwidth) -> reference built (seed 42) and its
own peak memory measured -> tamper snapshot -> candidate imported and built (seed 42) -> first forward under
the op recorder (anti-cheat on ops, outputs, aliasing) -> pointer-cache probe -> correctness trials with
fresh seeds, both orders, poisoned memory -> determinism re-runs -> float64 precision check (in batch chunks
when it does not fit) -> second shape set (every module-level size varied, models rebuilt; :mod:`.shapes`)
-> tamper check -> interleaved timing (:mod:`.timing`) with the wall-clock cross-check and the
speed-of-light floor of this device.

One numeric path (:mod:`.numerics`): correctness runs in IEEE fp32 (TF32 off everywhere); the candidate is
timed under exactly those settings, the eager and torch.compile baselines under PyTorch's defaults (cuDNN
TF32 on, as shipped). What a candidate switches inside its forward is confined to its own calls.

Memory (:mod:`.memory`): the harness keeps to about 3x the reference's own peak. Each stage frees what the
next does not need, the comparison and the float64 check work in chunks, the NaN block is sized to the
room left, and inputs do not move between timed calls. Every stage's peak is in ``details["peak_mem_mb"]``.
An out-of-memory error in the harness's own work, or in a candidate that was left less room than the
reference's forward needed, is ``details["harness_failure"]``, not the candidate's.

Inputs are made on the GPU (``get_inputs()`` under the device as default device), so a task with
several GB of inputs costs milliseconds per seed instead of seconds of CPU random numbers and copies.

Precision (``EvalConfig.precision``, docs/precision.md): in bf16 or fp16 every floating tensor of
``get_inputs()`` and ``get_init_inputs()`` is cast to that dtype and both models' floating parameters and
buffers follow (``Module.to(device, dtype)``), as KernelBench does; the protocol's tolerance for that dtype
applies to every floating output, the fp32-only checks (float64 accuracy, no fp16/bf16 ops) are off, and the speed-of-light
floor divides by that dtype's tensor-core peak. fp32 evaluates the task as written.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch

from . import timing  # binds the timing functions before any candidate is imported
from .checks import OpRecorder, Tamper, aliases_inputs, judge_ops, output_problems
from .compare import (
    combine_error_parts,
    compare_outputs,
    fingerprint,
    flatten_outputs,
    normalized_error,
    normalized_error_parts,
)
from .failures import Stage, classify_exception
from .gpu_facts import gpu_facts
from .memory import MB, MemoryLedger, is_oom, oom_is_candidates
from .numerics import BackendSettings, applied, confined, ieee_fp32, timing_settings
from .results import EvalConfig
from .shapes import ShapePlan, shape_plans

log = logging.getLogger(__name__)

L2_BYTES = 60 * 2**20  # used when the GPU reports no L2 size


class _Stop(Exception):
    """Ends the evaluation early with a result."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("message", ""))
        self.result = result


#: the precisions that cast a task (fp32 evaluates the task as written)
CAST_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}

#: torch dtype -> the short name ``details["task_dtype"]`` and the query context use
SHORT_DTYPES: dict[torch.dtype, str] = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _to_device(values: Sequence[Any], device: torch.device, cast: torch.dtype | None = None) -> list[Any]:
    """``values`` on ``device``; with ``cast``, every floating-point tensor in that dtype as well (as KernelBench
    casts a task's inputs to its precision; integer and boolean tensors, indices and masks, keep theirs)."""
    return [(v.to(device, dtype=cast) if cast is not None and v.is_floating_point() else v.to(device))
            if isinstance(v, torch.Tensor) else v for v in values]


def _to_precision(model: Any, device: torch.device, cast: torch.dtype | None) -> Any:
    """A model on ``device`` with its floating parameters and buffers in ``cast`` (``Module.to`` leaves integer
    buffers alone), as KernelBench moves both models with ``.to(device, dtype=precision)``."""
    if not isinstance(model, torch.nn.Module):
        return model
    return model.to(device, dtype=cast) if cast is not None else model.to(device)


def task_dtype_name(dtypes: set[torch.dtype]) -> str:
    """``fp32`` / ``bf16`` / ``fp16`` for one floating dtype, ``mixed`` for several, ``none`` for none."""
    if len(dtypes) > 1:
        return "mixed"
    if not dtypes:
        return "none"
    only = next(iter(dtypes))
    return SHORT_DTYPES.get(only, str(only).replace("torch.", ""))


def _clone(values: Sequence[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in values]


def _copy_into(dst: Sequence[Any], src: Sequence[Any]) -> None:
    """Copy every tensor of ``src`` into the tensor of ``dst`` at the same place (a function, so that no loop
    variable outlives the copy and holds a 6 GB input)."""
    for d, s in zip(dst, src, strict=True):
        if isinstance(d, torch.Tensor):
            d.copy_(s)


def _bitwise_equal(first: Any, again: Any) -> bool:
    """Whether every tensor output of two forwards is bit for bit the same (shapes that differ are left to the
    tolerance comparison)."""
    return all(torch.equal(a, b) for a, b in zip(flatten_outputs(first), flatten_outputs(again), strict=False)
               if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape)


def _float_dtypes(values: Sequence[Any]) -> set[torch.dtype]:
    return {v.dtype for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()}


def _module_bytes(model: Any) -> int:
    if not isinstance(model, torch.nn.Module):
        return 0
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def device_facts(device: torch.device) -> dict[str, Any]:
    """The evaluating GPU as the prompts and the speed-of-light check should see it: what the device reports
    (name, SMs, L2, memory), a copy bandwidth measured here, and the data-sheet figures of ``gpus.json``."""
    props = torch.cuda.get_device_properties(device)
    name = torch.cuda.get_device_name(device)
    table = gpu_facts(name)
    facts: dict[str, Any] = {
        "name": name, "arch": f"sm_{props.major}{props.minor}", "sm_count": int(props.multi_processor_count),
        "l2_mb": round(int(getattr(props, "L2_cache_size", 0) or 0) / MB, 1),
        "memory_gb": round(int(props.total_memory) / 1e9, 1),
        "copy_tb_s": round(timing.copy_bandwidth_tb_s(device), 2), "source": "measured on the evaluating device",
    }
    for key in ("hbm_peak_tb_s", "fp32_tflops", "tf32_tflops", "bf16_tflops", "fp16_tflops"):
        if key in table:
            facts[key] = table[key]
    return facts


def floor_bandwidth(evaluated: dict[str, Any], table: dict[str, Any]) -> float:
    """Bytes per second the speed-of-light floor divides by: the evaluating device's measured copy bandwidth, or
    its data-sheet copy figure when that is higher (a slow measurement never raises the floor); the H200's
    only when the device is neither measured nor known."""
    best = max(float(evaluated.get("copy_tb_s") or 0.0), float(table.get("copy_tb_s") or 0.0))
    return best * 1e12 if best > 0 else timing.PEAK_BYTES_PER_S


#: floor dtype -> the ``gpus.json`` key prefix of its peak
FLOOR_KEYS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def floor_dtype(precision: str, task_dtype: str | None) -> str:
    """The dtype whose peak the speed-of-light floor divides FLOPs by: the precision's when it casts the task
    (bf16, fp16); in fp32 precision the task's own (fp32, or fp16 / bf16 for a task written in half), and
    bf16 for a mixed one."""
    if precision in ("bf16", "fp16"):
        return "bfloat16" if precision == "bf16" else "float16"
    return {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(task_dtype or "", "bfloat16")


def fp64_errors(ref_model: Any, inputs: list[Any], ref_out: Any, cand_out: Any, *, max_bytes: int | None,
                config: EvalConfig, forward_bytes: int = 0) -> tuple[float, float, str]:
    """(reference error, candidate error, how) against a float64 forward of ``ref_model``, both normalized by
    the largest reference value (:func:`.compare.normalized_error`).

    With ``max_bytes`` smaller than the float64 working set, the batch is cut into chunks: each chunk's fp32
    reference must equal the same rows of the full fp32 reference (a forward whose rows depend on each other,
    such as BatchNorm in training, is not cut; then ``ValueError``), and its float64 forward is compared with
    those rows of both outputs. The maxima over chunks are the maxima over the batch, so the verdict is the one
    the whole batch gives. ``forward_bytes`` is what the fp32 forward allocates (output and temporaries; the
    output's size when not given): a float64 forward needs twice that and twice the inputs."""
    m64 = copy.deepcopy(ref_model).double() if isinstance(ref_model, torch.nn.Module) else ref_model

    def to64(values: Sequence[Any]) -> list[Any]:
        return [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else
                v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in values]

    in_bytes = timing.tensor_bytes(inputs)
    fwd = max(forward_bytes, timing.tensor_bytes(flatten_outputs(ref_out)))
    if max_bytes is None or 2 * (in_bytes + fwd) <= 0.8 * max_bytes:  # float64 inputs and forward
        out64 = m64(*to64(inputs))
        e_ref = normalized_error(normalized_error_parts(out64, ref_out))
        e_cand = normalized_error(normalized_error_parts(out64, cand_out))
        return e_ref, e_cand, "whole batch"
    tensors = [v for v in inputs if isinstance(v, torch.Tensor) and v.dim() > 0]
    outs = flatten_outputs(ref_out)
    if not tensors:
        raise ValueError("no input tensor to cut into chunks")
    batch = tensors[0].shape[0]
    if batch < 2 or any(not isinstance(o, torch.Tensor) or o.dim() == 0 or o.shape[0] != batch for o in outs):
        raise ValueError("the outputs do not share the inputs' first dimension: the batch cannot be cut")
    # per chunk: its float64 inputs and forward, and its fp32 inputs and forward (the rows check)
    chunks = min(batch, math.ceil(3 * (in_bytes + fwd) / max(1, int(0.8 * max_bytes))))
    step = math.ceil(batch / chunks)
    acc_ref: list[tuple[float, float]] | None = None
    acc_cand: list[tuple[float, float]] | None = None
    for lo in range(0, batch, step):
        hi = min(batch, lo + step)
        part = [v[lo:hi].clone() if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == batch
                else v for v in inputs]
        rows_ref = [o[lo:hi] for o in outs]
        rows_cand = [o[lo:hi] for o in flatten_outputs(cand_out)]
        out64 = m64(*to64(part))  # float64 copies first: the fp32 forward below may write into ``part``
        if not compare_outputs(rows_ref, ref_model(*part), config).ok:
            raise ValueError("the reference's rows depend on other rows of the batch: the batch cannot be cut")
        acc_ref = combine_error_parts(acc_ref, normalized_error_parts(out64, rows_ref))
        acc_cand = combine_error_parts(acc_cand, normalized_error_parts(out64, rows_cand))
        del out64, part
    return normalized_error(acc_ref or []), normalized_error(acc_cand or []), f"{chunks} batch chunks"


class CudaUnavailable(RuntimeError):
    """The job asked for the GPU and this worker cannot reach it: a harness failure, never the candidate's."""

    harness_failure = True


def cuda_unavailable_reason() -> str:
    """Why ``torch.cuda.is_available()`` is false here: the driver's own error where it gives one."""
    try:
        torch.cuda.init()
    except Exception as exc:  # noqa: BLE001 - the message is the point
        return str(exc).splitlines()[0][:300] or type(exc).__name__
    return f"no device visible (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')!r})"


class Evaluation:
    def __init__(self, req: dict[str, Any], stage: Stage) -> None:
        self.req = req
        self.stage = stage
        self.config = EvalConfig.from_dict(req["config"])
        self.cast = CAST_DTYPES.get(self.config.precision)  # None: fp32, the task as written
        if self.cast is not None:  # as KernelBench: the precision's tolerance for every floating output (a forward
            # that returns fp32 from bf16 work is held to bf16's, not to fp32's 1e-4)
            pair = [float(v) for v in self.config.tolerance(self.config.precision_dtype)]
            self.config.tolerances = {**self.config.tolerances,
                                      **{name: pair for name in ("float32", "float64", "float16", "bfloat16")}}
        self.sticky = False
        self.details: dict[str, Any] = {}
        wants_cuda = req.get("device_type", "cuda") == "cuda"
        if wants_cuda and not torch.cuda.is_available():
            # the parent sees a GPU and this worker does not (the sandbox hid a device node, a driver file or
            # the CUDA libraries): evaluating on the CPU instead would publish CPU timings as GPU figures
            raise CudaUnavailable(f"the parent process sees a CUDA device but this worker does not: "
                                  f"{cuda_unavailable_reason()}")
        if wants_cuda:
            self.device = torch.device("cuda", 0)  # the parent set CUDA_VISIBLE_DEVICES
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        self.cuda = self.device.type == "cuda"
        self.mem = MemoryLedger(self.device if self.cuda else None)
        if self.cuda and self.config.memory_trace:
            self.mem.trace = []
        self.defaults = BackendSettings.current()  # PyTorch's shipped settings, as this worker started
        self.verified = self.defaults
        self.switched: dict[str, list[Any]] = {}  # backend switches the candidate made inside its calls

    # --- helpers -------------------------------------------------------------------------------
    def sync(self) -> None:
        if self.cuda:
            timing._sync()

    def at(self, name: str) -> None:
        """Enter a stage: the stage file for the parent, and the memory ledger."""
        self.mem.enter(name)
        self.stage(name)

    def call(self, model: Any, inputs: Sequence[Any], what: str) -> Any:
        """Run candidate code under the verified settings; an exception becomes the result's failure class
        (an out-of-memory error is the harness's when the harness left the candidate too little room)."""
        held = self.mem.allocated()
        try:
            out = confined(model, self.verified, self.switched)(*inputs)
            self.sync()
            return out
        except _Stop:
            raise
        except BaseException as exc:  # noqa: BLE001
            status, message, sticky, build_log = classify_exception(exc)
            self.sticky = self.sticky or sticky
            extra: dict[str, Any] = {}
            if status == "oom" and self.cuda and not oom_is_candidates(
                    held_bytes=held, total_bytes=self.mem.total(), reference_forward_bytes=self.mem.reference_forward):
                extra = {"harness_failure": True, "oom_in": "harness"}
                message += (f"; the harness held {held / 2**30:.1f} GB of {self.mem.total() / 2**30:.1f} GB, less "
                            f"room than twice the reference forward's {self.mem.reference_forward / 2**30:.2f} GB: "
                            "a harness failure")
            raise _Stop({"status": status, "correct": False, "build_log": build_log,
                         "message": f"{message} (in {what})", "details": extra}) from exc

    def on_device(self) -> Any:
        """Tensors a task's ``get_inputs``/``get_init_inputs`` creates land on the GPU directly."""
        return torch.device(self.device) if self.cuda else contextlib.nullcontext()

    def fresh_inputs(self, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        with self.on_device():
            values = self.task.get_inputs()
        return _to_device(list(values), self.device, self.cast)

    def poison(self, nbytes: list[int]) -> None:
        """Fill the caching allocator's free blocks of the output sizes (and a spare one) with NaN, within the
        harness's memory budget: up to three blocks per output, at least one when it fits. Every bit is set, which
        reads as NaN in fp32, bf16 and fp16 alike (a fp32 NaN's low half is a bf16/fp16 zero), so an output a
        bf16 kernel leaves unwritten is NaN in every element."""
        if not self.cuda:
            return
        room = self.mem.headroom()
        blocks = []
        for n in nbytes:
            copies = 3 if 3 * n <= room // 2 else 1 if n <= room else 0
            for _ in range(copies):
                blocks.append(torch.full((max(1, n // 4),), -1, dtype=torch.int32, device=self.device))
                room -= n
        big = int(min(room // 2, 2 * 2**30)) // 4
        if big > 0:
            blocks.append(torch.full((big,), -1, dtype=torch.int32, device=self.device))
        self.sync()
        del blocks

    def dtype_hint(self, details: dict[str, Any]) -> str:
        """For an output in the wrong dtype in a cast task: what the precision asks of it."""
        if details.get("check") != "dtype" or self.cast is None:
            return ""
        return (f" (the task runs in {self.config.precision}: its floating inputs, weights and buffers are "
                f"{str(self.cast).replace('torch.', '')}, and each output must have the reference's dtype)")

    def cheat(self, check: str, message: str, **extra: Any) -> None:
        raise _Stop({"status": "cheat", "correct": False, "message": f"{check}: {message}",
                     "details": {"cheat_check": check, **extra}})

    def settle_switches(self, when: str) -> None:
        """Backend settings the candidate changed outside a forward (at import, in its constructor) are noted
        and put back: the candidate runs under the verified settings, whatever it set."""
        now = BackendSettings.current()
        if now != self.verified:
            diff = self.verified.differences(now)
            self.switched.update(diff)
            self.details.setdefault("warnings", []).append(
                f"the candidate changed backend settings {when} ({', '.join(diff)}): they apply inside its own "
                "calls only, the same while it is verified and while it is timed")
            self.verified.apply()

    # --- stages --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        try:
            with torch.no_grad():
                result = self._run()
        except _Stop as stop:
            result = stop.result
        except Exception as exc:  # an OOM here is the harness's own work (candidate calls go through call())
            if not is_oom(exc):
                raise
            result = {"status": "oom", "correct": False,
                      "message": f"out of memory in the harness's own work during {self.stage.name}: "
                                 f"{str(exc).splitlines()[0][:300]}",
                      "details": {"harness_failure": True, "oom_in": "harness"}}
        details = result.setdefault("details", {})
        for k, v in self.details.items():
            details.setdefault(k, v)
        if self.cuda:
            details["peak_mem_mb"] = self.mem.report()
            details["held_mem_mb"] = self.mem.held_report()
            if self.mem.trace is not None:
                details["memory_trace"] = self.mem.trace
        details["numeric_path"] = {"verified": self.verified.describe(),
                                   "candidate_timed": self.verified.describe(),
                                   "baselines_timed": self.defaults.describe()}
        if self.switched:
            details["numeric_path"]["candidate_switched"] = self.switched
        return result

    def _run(self) -> dict[str, Any]:
        from .build import BUILD_EVENTS, install_build_hooks
        from .fastpath import BUILD_STATS
        from .loader import load_candidate, load_task

        cfg = self.config
        self.verified = ieee_fp32()
        self.details["protocol"] = cfg.protocol

        self.at("load_task")
        self.task = load_task(self.req["task"])
        if self.cuda:
            self.at("device_facts")
            self.details["gpu"] = device_facts(self.device)
            torch.cuda.empty_cache()

        # ---- reference: built, run once, its own peak memory measured ----
        self.at("build_reference")
        before_build = self.mem.allocated()
        init = _to_device(list(self.task.get_init_inputs()), self.device, self.cast)
        ref_model = self.construct(self.task.Model, init)
        params = self.mem.allocated() - before_build

        self.at("reference_forward")
        x0 = self.fresh_inputs(cfg.seed)
        in_bytes0 = timing.tensor_bytes(x0)
        rx = _clone(x0)
        held = self.mem.allocated()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        rec_ref = OpRecorder()
        with rec_ref:
            ref0 = ref_model(*rx)
        self.sync()
        if self.cuda:
            self.mem.reference_forward = int(torch.cuda.max_memory_allocated(self.device)) - held
            self.mem.reference_peak = params + in_bytes0 + self.mem.reference_forward
        ref_out0 = flatten_outputs(ref0)
        out_bytes = [o.numel() * o.element_size() for o in ref_out0 if isinstance(o, torch.Tensor)]
        ref_alias = aliases_inputs(ref_out0, rx)
        ref_mutates = any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(rx, x0, strict=True))
        del rx
        in_dtypes = _float_dtypes(x0) | _float_dtypes(ref_out0)
        # the fp32-only checks (float64 accuracy, no fp16/bf16 ops) hold for a fp32 task in fp32 precision only
        task_fp32 = bool(in_dtypes) and in_dtypes <= {torch.float32} and self.cast is None
        self.details["task_dtype"] = task_dtype_name(in_dtypes)
        self.details["precision"] = cfg.precision
        self.details["reference_ops"] = dict(rec_ref.record.ops)
        del ref_out0

        # ---- candidate import and build (tamper snapshot first) ----
        tamper = Tamper.snapshot()
        self.at("import_candidate")
        install_build_hooks(fast_headers=cfg.fast_headers)
        t0 = time.perf_counter()
        try:
            model_cls = load_candidate(self.req["candidate"], self.req["kind"])
        except BaseException as exc:  # noqa: BLE001
            status, message, sticky, build_log = classify_exception(exc)
            self.sticky = sticky
            return {"status": status, "correct": False, "message": f"{message} (importing the candidate)",
                    "build_log": build_log, "details": {"build_events": BUILD_EVENTS}}
        self.details["import_s"] = round(time.perf_counter() - t0, 3)
        self.details["build_events"] = BUILD_EVENTS
        self.details["fastpath_builds"] = BUILD_STATS
        self.settle_switches("when imported")
        found = tamper.check()
        if found:
            self.cheat(*found, when="after import")

        self.at("construct_candidate")
        try:
            cand_model = self.construct(model_cls, init)
        except BaseException as exc:  # noqa: BLE001
            status, message, sticky, build_log = classify_exception(exc)
            self.sticky = sticky
            return {"status": status, "correct": False, "message": f"{message} (constructing ModelNew)",
                    "build_log": build_log}
        self.settle_switches("in its constructor")

        # ---- first forward: ops, output type, aliasing ----
        self.at("first_forward")
        cx = _clone(x0)
        self.poison(out_bytes)
        rec_c = OpRecorder()
        with rec_c:
            out0 = self.call(cand_model, cx, "the first candidate forward")
        self.details["candidate_ops"] = dict(rec_c.record.ops)
        flat0 = flatten_outputs(out0)
        found = output_problems(flat0, cx, reference_aliases=ref_alias)
        if found:
            self.cheat(*found)
        del flat0
        cmp = compare_outputs(ref0, out0, cfg)
        if not cmp.ok:
            raise _Stop({"status": cmp.status, "correct": False,
                         "message": f"trial 0: {cmp.message}{self.dtype_hint(cmp.details)}",
                         "details": cmp.details | {"trial": 0}})
        warnings: list[str] = self.details.setdefault("warnings", [])
        found = judge_ops(rec_ref.record, rec_c.record, policy=cfg.library_policy, task_is_fp32=task_fp32,
                          torch_ops=cfg.torch_ops, warnings=warnings)
        if not warnings:
            del self.details["warnings"]
        if found:
            self.cheat(*found)
        if not ref_mutates and any(isinstance(a, torch.Tensor) and not torch.equal(a, b)
                                   for a, b in zip(cx, x0, strict=True)):
            self.cheat("input_mutated", "candidate wrote into its input tensors")
        print_out0, print_ref0 = fingerprint(out0), fingerprint(ref0)
        del out0, ref0, x0

        # ---- pointer-keyed cache probe: same tensors, new values ----
        self.at("pointer_probe")
        new_vals = self.fresh_inputs(cfg.seed + 1000)
        _copy_into(cx, new_vals)  # (a loop here would keep its last pair of tensors alive to the end of _run)
        ref_new = ref_model(*new_vals)
        self.sync()
        del new_vals
        self.poison(out_bytes)
        out_same = self.call(cand_model, cx, "the pointer-cache probe")
        cmp = compare_outputs(ref_new, out_same, cfg)
        if not cmp.ok:
            if fingerprint(out_same) == print_out0 and fingerprint(ref_new) != print_ref0:
                self.cheat("pointer_cache", "candidate returned its previous output for the same input "
                           "pointers after the input values changed")
            raise _Stop({"status": cmp.status, "correct": False,
                         "message": f"same-pointer trial: {cmp.message}", "details": cmp.details})
        del out_same, ref_new, cx

        # ---- correctness trials: fresh seeds, both orders, poisoned outputs ----
        worst: dict[str, float] = {}
        last_inputs: list[Any] = []
        last_out: Any = None
        for trial in range(cfg.correctness_trials):
            last_inputs, last_out = [], None  # the previous trial's tensors go before the stage's peak is taken
            self.at(f"correctness_trial_{trial}")
            xs = self.fresh_inputs(cfg.seed + 1 + trial)
            cx = _clone(xs)
            rx = _clone(xs) if ref_mutates else xs
            if trial % 2 == 0:
                ref_o = ref_model(*rx)
                self.sync()
                self.poison(out_bytes)
                cand_o = self.call(cand_model, cx, f"correctness trial {trial}")
            else:
                self.poison(out_bytes)
                cand_o = self.call(cand_model, cx, f"correctness trial {trial}")
                ref_o = ref_model(*rx)
                self.sync()
            del cx, rx
            cmp = compare_outputs(ref_o, cand_o, cfg)
            if not cmp.ok:
                raise _Stop({"status": cmp.status, "correct": False,
                             "message": f"trial {trial + 1} (seed {cfg.seed + 1 + trial}, "
                             f"{'reference' if trial % 2 == 0 else 'candidate'} first): {cmp.message}",
                             "details": cmp.details | {"trial": trial + 1}})
            for k, v in cmp.details.items():
                if isinstance(v, float):
                    worst[k] = max(worst.get(k, 0.0), v)
            last_inputs, last_out = xs, (ref_o, cand_o)
            del xs, ref_o, cand_o
        self.details["errors"] = worst

        # ---- determinism re-runs on identical inputs ----
        self.at("determinism")
        ref_o, first = last_out
        last_out = None
        tight = copy.copy(cfg)
        float_outs = [o for o in flatten_outputs(ref_o) if isinstance(o, torch.Tensor) and o.is_floating_point()]
        out_dtype = str(float_outs[0].dtype).replace("torch.", "") if float_outs else "float32"
        del float_outs
        atol, rtol = cfg.tolerance(out_dtype)
        self.details["tolerance"] = {"dtype": out_dtype, "atol": atol, "rtol": rtol}  # what the trials held to
        tight.atol, tight.rtol = atol * 0.1, rtol * 0.1
        bitwise = True
        for r in range(cfg.determinism_reruns):
            self.poison(out_bytes)
            again = self.call(cand_model, _clone(last_inputs), f"determinism re-run {r + 1}")
            bitwise = bitwise and _bitwise_equal(first, again)
            cmp = compare_outputs(first, again, tight)
            if not cmp.ok:
                raise _Stop({"status": "nondeterministic", "correct": False,
                             "message": f"re-run {r + 1} on identical inputs differs: {cmp.message}",
                             "details": cmp.details})
            del again
        self.details["bitwise_deterministic"] = bitwise

        # ---- precision: against a float64 reference (fp32 tasks) ----
        if cfg.check_fp64 and task_fp32:
            self.at("precision_fp64")
            self.precision_check(ref_model, last_inputs, ref_o, first)
        elif cfg.check_fp64 and self.cast is not None:
            self.details["fp64_check"] = (f"skipped: the task runs in {cfg.precision}; the float64 check guards "
                                          "fp32 tasks against lower-precision math")
        del ref_o, first

        # ---- second shape set ----
        if cfg.alt_shapes and cfg.shapes != "none":
            self.at("alt_shapes")
            self.alt_shape_check(model_cls, ref_model, cand_model, init, in_bytes0)
        else:
            self.details["alt_shapes"] = f"skipped: the protocol's shapes = {cfg.shapes!r}"

        self.at("tamper_check")
        found = tamper.check()
        if found:
            self.cheat(*found, when="after the candidate's forwards")

        result: dict[str, Any] = {"status": "ok", "correct": True, "message": "correct"}
        if cfg.time:
            self.at("timing")
            result.update(self.time_models(ref_model, cand_model, last_inputs, ref_mutates=ref_mutates))
        self.mem.close()
        return result

    # --- second shape set ----------------------------------------------------------------------
    def alt_shape_check(self, model_cls: Any, ref_model: Any, cand_model: Any, init: list[Any],
                        orig_bytes: int) -> None:
        """Run reference and candidate on a second shape set; a candidate that fails there is rejected.

        ``get_inputs_alt()`` when the task has one (same models); else the plans of :func:`shape_plans`
        (every module-level size varied, both models rebuilt from the varied ``get_init_inputs()``),
        the first one the reference accepts within the original input bytes.
        """
        cfg = self.config
        if hasattr(self.task, "get_inputs_alt"):
            plans = [ShapePlan("get_inputs_alt()", {}, rebuild=False)]
        else:
            plans = shape_plans(self.task, cfg.shapes, cfg.alt_batch_scale)
        tried: list[str] = []
        for plan in plans:
            try:
                task = plan.task_module(self.req["task"], self.task)
                ref_m, alt_init = ref_model, init
                if plan.rebuild:
                    with self.on_device():
                        alt_init = _to_device(list(task.get_init_inputs()), self.device, self.cast)
                    ref_m = self.construct(task.Model, alt_init)
                torch.manual_seed(cfg.seed + 77)
                with self.on_device():
                    xs = _to_device(list(task.get_inputs_alt() if plan.sizes == {} and not plan.rebuild
                                         else task.get_inputs()), self.device, self.cast)
                if timing.tensor_bytes(xs) > orig_bytes:
                    tried.append(f"{plan.description}: more input bytes than the original")
                    continue
                ref_a = ref_m(*_clone(xs))
                self.sync()
            except Exception as exc:  # noqa: BLE001 - the reference does not take this set: next plan
                tried.append(f"{plan.description}: the reference fails ({type(exc).__name__})")
                continue
            cand_m = cand_model
            if plan.rebuild:
                try:
                    cand_m = self.construct(model_cls, alt_init)
                except BaseException as exc:  # noqa: BLE001
                    status, message, sticky, build_log = classify_exception(exc)
                    self.sticky = self.sticky or sticky
                    raise _Stop({"status": status, "correct": False, "build_log": build_log,
                                 "message": f"{message} (constructing ModelNew for the second shape set: "
                                            f"{plan.description})",
                                 "details": {"failed_on": "alt_shapes"}}) from exc
            self.poison([o.numel() * o.element_size() for o in flatten_outputs(ref_a)
                         if isinstance(o, torch.Tensor)])
            cand_a = self.call(cand_m, _clone(xs), f"the second shape set ({plan.description})")
            cmp = compare_outputs(ref_a, cand_a, cfg)
            if not cmp.ok:
                raise _Stop({"status": cmp.status, "correct": False,
                             "message": f"second shape set ({plan.description}): {cmp.message}",
                             "details": cmp.details | {"failed_on": "alt_shapes", "alt_sizes": plan.sizes}})
            self.details["alt_shapes"] = plan.description
            if tried:
                self.details["alt_shapes_tried"] = tried
            return
        self.details["alt_shapes"] = ("skipped: " + ("; ".join(tried) if tried else
                                                     "the task defines no module-level size to vary"))

    def construct(self, cls: Any, init: list[Any]) -> Any:
        """A model built the same way for reference and candidate: seed first, parameters on the GPU."""
        torch.manual_seed(self.config.seed)
        with self.on_device():
            model = cls(*copy.deepcopy(init))
        return _to_precision(model, self.device, self.cast)

    # --- precision -----------------------------------------------------------------------------
    def precision_check(self, ref_model: Any, inputs: list[Any], ref_out: Any, cand_out: Any) -> None:
        """Both fp32 outputs against a float64 forward of the reference (in batch chunks when the float64
        working set does not fit the memory budget). A candidate far less accurate than the fp32 reference
        computed in lower precision: a cheat, unless the protocol accepts TF32-level error."""
        try:
            e_ref, e_cand, how = fp64_errors(ref_model, inputs, ref_out, cand_out,
                                             max_bytes=self.mem.headroom() if self.cuda else None,
                                             config=self.config, forward_bytes=self.mem.reference_forward)
            self.sync()
        except Exception as exc:  # noqa: BLE001 - no float64 path, or no room for it: skip, say so
            self.details["fp64_check"] = f"skipped: {type(exc).__name__}: {str(exc)[:200]}"
            if self.cuda:
                torch.cuda.empty_cache()
            return
        self.details["fp64_error"] = {"reference": e_ref, "candidate": e_cand, "computed_over": how}
        if e_cand > max(32 * e_ref, 2e-5) and self.config.allow_tf32:
            self.details.setdefault("warnings", []).append(
                f"candidate error against float64 is {e_cand:.3g} (reference {e_ref:.3g}): reduced precision, "
                f"accepted by protocol {self.config.protocol!r}")
        elif e_cand > max(32 * e_ref, 2e-5):
            self.cheat("precision_downcast", f"candidate error against a float64 reference is {e_cand:.3g}, "
                       f"the fp32 reference's is {e_ref:.3g}: the candidate computes in lower precision "
                       "(fp16/bf16/tf32) inside a fp32 task")

    # --- timing --------------------------------------------------------------------------------
    def time_models(self, ref_model: Any, cand_model: Any, inputs: list[Any], *,
                    ref_mutates: bool = False) -> dict[str, Any]:
        """Interleaved timing (:func:`.timing.time_interleaved`) on one numeric path.

        The candidate is timed under the settings it was verified under; the eager reference (and
        torch.compile) under PyTorch's defaults (cuDNN TF32 on, as shipped). When the reference runs a cuDNN
        convolution, the eager reference is also timed with TF32 off; both are reported when they differ by
        more than 5 %. Each function gets its own copy of the inputs when the memory budget has room (else
        they share one), and the same copy in every round. Rounds stop when each speedup's 95 % interval is
        within ``timing_ci`` of it, at the time budget, or at ``timing_trials``.
        """
        cfg = self.config
        in_bytes = timing.tensor_bytes(inputs)
        own_copies = ref_mutates or not self.cuda or 3 * in_bytes <= self.mem.headroom()
        # each function's settings are applied by its setup hook, outside the timed span, before each of its
        # calls: whatever the candidate switched in one call is undone before the next function runs
        fns: dict[str, Any] = {"reference": lambda xs: ref_model(*xs), "candidate": lambda xs: cand_model(*xs)}
        ref_ops = self.details.get("reference_ops") or {}
        if self.cuda and any("conv" in op for op in ref_ops):
            fns["reference_ieee"] = lambda xs: ref_model(*xs)
        compile_note = None
        if cfg.baseline == "compile":
            try:
                compiled = torch.compile(ref_model)
                fns["compile"] = lambda xs: compiled(*xs)
            except Exception as exc:  # noqa: BLE001
                compile_note = f"torch.compile failed: {exc}"
        sets = {name: [_clone(inputs) if own_copies and name != "reference" else inputs] for name in fns}
        settings = {name: timing_settings(name, verified=self.verified, defaults=self.defaults) for name in fns}
        setup = {name: s.apply for name, s in settings.items()}
        pairs = [("reference", "candidate")] + ([("compile", "candidate")] if "compile" in fns else [])
        flusher = timing.L2Flusher(self.device, cfg.l2_flush_mb) if self.cuda else None
        try:
            with applied(self.verified):
                if self.cuda:
                    samples = timing.time_interleaved(fns, sets, trials=cfg.timing_trials, warmup=cfg.warmup,
                                                      flusher=flusher,  # type: ignore[arg-type]
                                                      budget_s=cfg.timing_budget_s, min_trials=cfg.min_timing_trials,
                                                      pairs=pairs, ci_target=cfg.timing_ci, setup=setup)
                else:
                    samples = _time_cpu(fns, sets, min(cfg.timing_trials, max(cfg.min_timing_trials, 20)),
                                        cfg.warmup, setup)
        except _Stop:
            raise
        except BaseException as exc:  # noqa: BLE001
            status, message, sticky, build_log = classify_exception(exc)
            self.sticky = sticky
            extra = {"harness_failure": True, "oom_in": "harness"} if status == "oom" else {}
            raise _Stop({"status": status, "correct": False, "message": f"{message} (while timing)",
                         "details": extra}) from exc
        finally:
            del sets
        cand = samples["candidate"].summary()
        ref = samples["reference"].summary()
        speedup, lo, hi = timing.median_ratio_ci(samples["reference"].event_ms, samples["candidate"].event_ms)
        out: dict[str, Any] = {
            "candidate_ms": cand["median_ms"], "baseline_ms": ref["median_ms"],
            "candidate_iqr_ms": cand["iqr_ms"], "baseline_iqr_ms": ref["iqr_ms"],
            "speedup": ref["median_ms"] / cand["median_ms"] if cand["median_ms"] > 0 else None,
            "speedup_ci": [lo, hi],
        }
        self.details["timing"] = {
            "candidate": cand, "reference": ref, "inputs": "one copy per function" if own_copies else "shared",
            "trials": int(cand["trials"]), "max_trials": cfg.timing_trials, "budget_s": cfg.timing_budget_s,
            "ci_target": cfg.timing_ci, "stop": samples["candidate"].stop, "warmup": cfg.warmup,
            "backend_settings": {name: s.describe() for name, s in settings.items()},
        }
        if "reference_ieee" in samples:
            ieee_s = samples["reference_ieee"].summary()
            self.details["timing"]["reference_ieee"] = ieee_s
            differs = abs(ieee_s["median_ms"] - ref["median_ms"]) > 0.05 * ref["median_ms"]
            if differs:
                out["baseline_ieee_ms"] = ieee_s["median_ms"]
                self.details.setdefault("warnings", []).append(
                    f"eager baseline {ref['median_ms']:.4g} ms under PyTorch's defaults (cuDNN TF32 on), "
                    f"{ieee_s['median_ms']:.4g} ms with TF32 off: the speedup is against the default")
        if "compile" in samples:
            comp = samples["compile"].summary()
            out["compile_ms"] = comp["median_ms"]
            self.details["timing"]["compile"] = comp
            est, clo, chi = timing.median_ratio_ci(samples["compile"].event_ms, samples["candidate"].event_ms)
            self.details["speedup_vs_compile"] = comp["median_ms"] / cand["median_ms"]
            out["compile_speedup_ci"] = [clo, chi]
        if compile_note:
            self.details["compile_baseline"] = compile_note
        if self.cuda:
            suspect, info = timing.side_stream_suspect(samples["candidate"], samples["reference"],
                                                       cfg.side_stream_factor)
            self.details["wall_check"] = info
            if suspect:
                self.cheat("side_stream", f"CUDA events say {cand['median_ms']:.4g} ms but the wall clock "
                           f"with a device synchronize says {info['wall_candidate_ms']:.4g} ms: work runs "
                           "outside the timed stream", **info)
            del samples
            self.speed_of_light(inputs, ref_model, cand["median_ms"], in_bytes)
        return out

    def speed_of_light(self, inputs: list[Any], ref_model: Any, cand_ms: float, in_bytes: int) -> None:
        """The floor of this device: bytes over its copy bandwidth (the measured one, or the table's when that
        is higher), FLOPs over its fp32-accurate peak, or the bf16 / fp16 tensor-core peak for a task in that
        precision (:func:`floor_dtype`)."""
        with torch.no_grad():
            outs = flatten_outputs(ref_model(*inputs))
        out_bytes = timing.tensor_bytes(outs)
        del outs
        gpu = self.details.get("gpu") or {}
        facts = gpu_facts(gpu.get("name") or torch.cuda.get_device_name(self.device))
        l2 = int(float(gpu.get("l2_mb") or 0) * MB) or L2_BYTES
        moved = in_bytes + max(0, out_bytes - l2)
        flops = timing.count_flops(lambda: ref_model(*inputs))
        dtype = floor_dtype(self.config.precision, self.details.get("task_dtype"))
        bw = floor_bandwidth(gpu, facts)
        if dtype == "float32":  # error-compensated TF32 on tensor cores is a legitimate fp32-accurate route
            fp32, tf32 = facts.get("fp32_tflops"), facts.get("tf32_tflops")
            rate = timing.fp32_accurate_flops(float(fp32) * 1e12 if fp32 else timing.PEAK_FLOPS["float32"],
                                              float(tf32) * 1e12 if tf32 else timing.PEAK_TF32_FLOPS)
        else:  # the tensor-core peak of the dtype the task runs in
            peak = facts.get(f"{FLOOR_KEYS[dtype]}_tflops") or facts.get("bf16_tflops")
            rate = float(peak) * 1e12 if peak else None
        floor = timing.speed_of_light_ms(moved, flops, dtype, bytes_per_s=bw, flops_per_s=rate)
        self.details["speed_of_light"] = {"floor_ms": floor, "bytes": moved, "flops": flops, "dtype": dtype,
                                          "bytes_per_s": bw, "gpu": gpu.get("name") or facts.get("name", "unknown"),
                                          "fraction_of_floor": floor / cand_ms if cand_ms > 0 else math.inf}
        if floor >= 0.01 and cand_ms < self.config.sol_fail_fraction * floor:
            self.cheat("speed_of_light", f"{cand_ms:.4g} ms is below half the speed-of-light floor "
                       f"{floor:.4g} ms ({moved / 1e6:.1f} MB at {bw / 1e12:.2g} TB/s, {flops / 1e9:.1f} GFLOP)")


def _time_cpu(fns: dict[str, Any], sets: dict[str, list[Any]], trials: int, warmup: int,
              setup: dict[str, Any]) -> dict[str, Any]:
    for name, fn in fns.items():
        setup[name]()
        for w in range(max(1, warmup)):
            fn(sets[name][w % len(sets[name])])
    samples = {n: timing.Samples([], []) for n in fns}
    names = list(fns)
    for i in range(trials):
        for name in names if i % 2 == 0 else reversed(names):
            setup[name]()
            t0 = timing._perf()
            fns[name](sets[name][i % len(sets[name])])
            ms = (timing._perf() - t0) * 1e3
            samples[name].event_ms.append(ms)
            samples[name].wall_ms.append(ms)
    for s in samples.values():
        s.stop = f"max rounds ({trials})"
    return samples


def profile_target(req: dict[str, Any], stage: Stage) -> dict[str, Any]:
    """One forward between cudaProfilerStart/Stop (after a warm-up), for ncu."""
    from .build import install_build_hooks
    from .loader import load_candidate, load_task

    cfg = EvalConfig.from_dict(req["config"])
    device = torch.device("cuda", 0)
    verified = ieee_fp32()  # the candidate is profiled on the path it was verified and timed on
    stage("load_task")
    task = load_task(req["task"])
    cast = CAST_DTYPES.get(cfg.precision)  # profiled in the precision it was evaluated in
    init = _to_device(list(task.get_init_inputs()), device, cast)
    torch.manual_seed(cfg.seed)
    if req.get("target") == "reference":
        model = _to_precision(task.Model(*init), device, cast)
    else:
        install_build_hooks(fast_headers=cfg.fast_headers)
        stage("import_candidate")
        cls = load_candidate(req["candidate"], req["kind"])
        model = cls(*init)
        model = _to_precision(model, device, cast)
        model = confined(model, verified)
    torch.manual_seed(cfg.seed)
    xs = _to_device(list(task.get_inputs()), device, cast)
    stage("warmup")
    model(*xs)
    torch.cuda.synchronize()
    stage("profiled_forward")
    torch.cuda.cudart().cudaProfilerStart()
    model(*xs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return {"status": "ok", "correct": False, "message": "profiled one forward"}


__all__ = ["Evaluation", "device_facts", "floor_bandwidth", "floor_dtype", "fp64_errors", "profile_target",
           "statistics", "task_dtype_name"]
