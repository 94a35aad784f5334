"""Anti-cheat checks that run inside the worker (torch + standard library).

* :class:`OpRecorder` is a ``TorchDispatchMode`` that records every aten op a forward runs and the
  dtypes it produces; from the reference's and the candidate's records we tell whether the candidate
  computed the whole op with torch, called a cuBLAS/cuDNN-backed op against the policy, or produced
  half-precision intermediates inside a fp32 task. (Direct cuBLAS calls from C++ are invisible here.)
* :class:`Tamper` snapshots the timing functions and the live threads before the candidate is imported
  and reports what changed afterwards. Backend switches (TF32, cuDNN modes) are not a cheat by themselves:
  :mod:`.numerics` confines them to the candidate's own calls and the float64 check judges the result.
* :func:`output_problems` rejects outputs that are not exactly ``torch.Tensor`` or that share memory
  with an input.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: aten ops that move, view, allocate or fill memory: never "computing the op"
NON_COMPUTE = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill", "fill_",
    "zero", "zero_", "copy", "copy_", "clone", "_to_copy", "to", "contiguous", "view", "_unsafe_view",
    "reshape", "as_strided", "as_strided_", "t", "transpose", "permute", "expand", "expand_as",
    "unsqueeze", "squeeze", "select", "slice", "narrow", "detach", "alias", "lift_fresh",
    "lift_fresh_copy", "unbind", "split", "split_with_sizes", "chunk", "flatten", "unflatten",
    "view_as", "resize_", "set_", "_reshape_alias", "unfold", "diagonal", "arange", "scalar_tensor",
    "_local_scalar_dense", "item", "is_nonzero", "sym_size", "sym_stride", "sym_numel", "dim",
    "size", "stride", "numel", "record_stream", "_has_compatible_shallow_copy_type", "empty_permuted",
    "cat", "stack", "pad", "constant_pad_nd",
}
#: aten ops backed by cuBLAS / cuDNN (the "GEMM/conv part")
LIBRARY = {
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "vdot", "addbmm",
    "einsum", "tensordot", "_scaled_mm", "convolution", "_convolution", "conv1d", "conv2d", "conv3d",
    "cudnn_convolution", "cudnn_convolution_transpose", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution_overrideable", "_convolution_mode", "cudnn_batch_norm",
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention", "_fused_rms_norm",
}
LOW_PRECISION = {torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2}


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", str(func))  # e.g. "add.Tensor"
    base = name.split(".")[0]
    return base


@dataclass
class OpRecord:
    ops: Counter[str] = field(default_factory=Counter)
    low_precision_ops: Counter[str] = field(default_factory=Counter)

    @property
    def compute_ops(self) -> Counter[str]:
        return Counter({k: v for k, v in self.ops.items() if k not in NON_COMPUTE})

    def to_dict(self) -> dict[str, Any]:
        return {"ops": dict(self.ops), "low_precision_ops": dict(self.low_precision_ops)}


class OpRecorder(TorchDispatchMode):
    """Record aten ops (and low-precision outputs) run while the mode is active."""

    def __init__(self) -> None:
        super().__init__()
        self.record = OpRecord()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = _op_name(func)
        self.record.ops[name] += 1
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION:
                self.record.low_precision_ops[name] += 1
        return out


def judge_ops(reference: OpRecord, candidate: OpRecord, *, policy: str, task_is_fp32: bool,
              torch_ops: str = "reject", warnings: list[str] | None = None) -> tuple[str, str] | None:
    """(check, message) when the candidate's torch ops break the rules, else None.

    ``torch_ops="warn"`` (the kernelbench protocol) turns "torch computes the whole op" into a line
    appended to ``warnings``, as KernelBench's static checker does; the other checks still reject.
    """
    cand = candidate.compute_ops
    ref = reference.compute_ops
    library = sorted(k for k in cand if k in LIBRARY)
    if policy == "forbid" and library:
        return "library_call", (f"candidate calls cuBLAS/cuDNN-backed torch ops ({', '.join(library)}) "
                                "but the library policy is 'forbid'")
    ref_rest = Counter({k: v for k, v in ref.items() if k not in LIBRARY})
    cand_rest = Counter({k: v for k, v in cand.items() if k not in LIBRARY})
    if ref:
        if policy == "forbid":
            covered = all(cand[k] >= v for k, v in ref.items())
        else:
            covered = bool(ref_rest) and all(cand_rest[k] >= v for k, v in ref_rest.items())
        if covered:
            message = (f"candidate computes the whole op with torch ops ({', '.join(sorted(cand))}) "
                       "instead of its own kernel")
            if torch_ops != "warn":
                return "torch_compute", message
            if warnings is not None:
                warnings.append(f"torch_compute: {message}")
    if task_is_fp32 and candidate.low_precision_ops and not reference.low_precision_ops:
        ops = ", ".join(sorted(candidate.low_precision_ops))
        return "precision_downcast", f"candidate produces fp16/bf16/fp8 tensors inside a fp32 task ({ops})"
    return None


@dataclass
class Tamper:
    """What the candidate must not change: the timing functions and the thread set."""

    originals: dict[str, Any] = field(default_factory=dict)
    threads: set[int] = field(default_factory=set)

    @staticmethod
    def _targets() -> dict[str, Any]:
        ev = torch.cuda.Event
        return {
            "torch.cuda.Event": ev,
            "torch.cuda.Event.record": getattr(ev, "record", None),
            "torch.cuda.Event.elapsed_time": getattr(ev, "elapsed_time", None),
            "torch.cuda.Event.synchronize": getattr(ev, "synchronize", None),
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "torch.cuda.current_stream": torch.cuda.current_stream,
            "time.perf_counter": time.perf_counter,
            "time.perf_counter_ns": time.perf_counter_ns,
            "time.time": time.time,
            "time.monotonic": time.monotonic,
            "torch.cuda.Stream.synchronize": torch.cuda.Stream.synchronize,
        }

    @classmethod
    def snapshot(cls) -> Tamper:
        return cls(originals=cls._targets(), threads={t.ident or 0 for t in threading.enumerate()})

    def check(self) -> tuple[str, str] | None:
        now = self._targets()
        changed = [k for k, v in self.originals.items() if now.get(k) is not v]
        if changed:
            return "timer_patched", f"candidate replaced timing functions: {', '.join(changed)}"
        new = [t for t in threading.enumerate() if (t.ident or 0) not in self.threads and t.is_alive()]
        if new:
            return "background_thread", f"candidate started threads: {', '.join(t.name for t in new)}"
        return None

    def restore(self) -> None:
        """Put the originals back (the harness keeps timing with its own references anyway)."""
        torch.cuda.Event = self.originals["torch.cuda.Event"]
        torch.cuda.synchronize = self.originals["torch.cuda.synchronize"]
        time.perf_counter = self.originals["time.perf_counter"]


def _storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        st = t.untyped_storage()
        return st.data_ptr(), st.data_ptr() + st.nbytes()
    except (RuntimeError, NotImplementedError):
        return None


def output_problems(outputs: list[Any], inputs: list[Any], *, reference_aliases: bool) -> tuple[str, str] | None:
    """Tensor-subclass and aliasing checks on a candidate's flat outputs."""
    for i, out in enumerate(outputs):
        if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
            return "tensor_subclass", (f"output {i} is a {type(out).__module__}.{type(out).__name__}, "
                                       "not a plain torch.Tensor")
    if reference_aliases:
        return None
    spans = [s for s in (_storage_span(t) for t in inputs if isinstance(t, torch.Tensor)) if s]
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor) or out.numel() == 0:
            continue
        span = _storage_span(out)
        if span and any(span[0] < hi and lo < span[1] for lo, hi in spans):
            return "output_aliases_input", f"output {i} shares memory with an input tensor"
    return None


def aliases_inputs(outputs: list[Any], inputs: list[Any]) -> bool:
    spans = [s for s in (_storage_span(t) for t in inputs if isinstance(t, torch.Tensor)) if s]
    for out in outputs:
        if isinstance(out, torch.Tensor) and out.numel():
            span = _storage_span(out)
            if span and any(span[0] < hi and lo < span[1] for lo, hi in spans):
                return True
    return False
