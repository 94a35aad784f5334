"""The GPU phase of one candidate, run inside a worker process (see :mod:`.worker`).

Order: reference built (seed 42) -> tamper snapshot -> candidate imported and built (seed 42) ->
first forward under the op recorder (anti-cheat on ops, outputs, aliasing) -> pointer-cache probe ->
correctness trials with fresh seeds, both orders, poisoned memory -> determinism re-runs -> second
shape set (every module-level size varied, models rebuilt; :mod:`.shapes`) -> float64 precision check ->
tamper check -> interleaved timing under PyTorch's default backend settings, bounded by a time budget,
with the wall-clock cross-check and the speed-of-light floor.

Inputs are made on the GPU (``get_inputs()`` under the device as default device), so a task with
several GB of inputs costs milliseconds per seed instead of seconds of CPU random numbers and copies.
Correctness runs with IEEE fp32 (TF32 off everywhere); the protocol in the config decides the
tolerances, the library and torch-op policies and the second shape set.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch

from . import timing  # binds the timing functions before any candidate is imported
from .checks import OpRecorder, Tamper, aliases_inputs, judge_ops, output_problems
from .compare import compare_outputs, flatten_outputs, max_normalized_error
from .failures import Stage, classify_exception
from .gpu_facts import gpu_facts
from .results import EvalConfig
from .shapes import ShapePlan, shape_plans

log = logging.getLogger(__name__)

L2_BYTES = 60 * 2**20  # used when the GPU is not in gpus.json


class _Stop(Exception):
    """Ends the evaluation early with a result."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("message", ""))
        self.result = result


def _to_device(values: Sequence[Any], device: torch.device) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _clone(values: Sequence[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in values]


def _float_dtypes(values: Sequence[Any]) -> set[torch.dtype]:
    return {v.dtype for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()}


def ieee_fp32() -> None:
    """Correctness settings: no TF32 anywhere (cuBLAS and cuDNN compute in IEEE fp32)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


#: PyTorch's shipped backend defaults (what a user running the model eagerly gets): TF32 off for
#: matmul, on for cuDNN convolutions
PYTORCH_DEFAULTS = {"matmul_tf32": False, "cudnn_tf32": True}


@contextlib.contextmanager
def backend_flags(*, matmul_tf32: bool, cudnn_tf32: bool) -> Any:
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
           torch.get_float32_matmul_precision())
    torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old[0], old[1]
        torch.set_float32_matmul_precision(old[2])


class Evaluation:
    def __init__(self, req: dict[str, Any], stage: Stage) -> None:
        self.req = req
        self.stage = stage
        self.config = EvalConfig.from_dict(req["config"])
        self.sticky = False
        self.details: dict[str, Any] = {}
        if torch.cuda.is_available() and req.get("device_type", "cuda") == "cuda":
            self.device = torch.device("cuda", 0)  # the parent set CUDA_VISIBLE_DEVICES
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        self.cuda = self.device.type == "cuda"

    # --- helpers -------------------------------------------------------------------------------
    def sync(self) -> None:
        if self.cuda:
            timing._sync()

    def call(self, model: Any, inputs: Sequence[Any], what: str) -> Any:
        """Run candidate code; an exception becomes the result's failure class."""
        try:
            out = model(*inputs)
            self.sync()
            return out
        except _Stop:
            raise
        except BaseException as exc:  # noqa: BLE001
            status, message, sticky, build_log = classify_exception(exc)
            self.sticky = self.sticky or sticky
            raise _Stop({"status": status, "correct": False, "build_log": build_log,
                         "message": f"{message} (in {what})"}) from exc

    def on_device(self) -> Any:
        """Tensors a task's ``get_inputs``/``get_init_inputs`` creates land on the GPU directly."""
        return torch.device(self.device) if self.cuda else contextlib.nullcontext()

    def fresh_inputs(self, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        with self.on_device():
            values = self.task.get_inputs()
        return _to_device(list(values), self.device)

    def poison(self, nbytes: list[int]) -> None:
        """Fill the caching allocator's free blocks of the output sizes (and a big one) with NaN."""
        if not self.cuda:
            return
        blocks = []
        free, _total = torch.cuda.mem_get_info(self.device)
        for n in nbytes:
            copies = 3 if 3 * n < 0.3 * free else 1 if n < 0.3 * free else 0  # 6 GB outputs: fewer copies
            for _ in range(copies):
                blocks.append(torch.full((max(1, n // 4),), float("nan"), dtype=torch.float32,
                                         device=self.device))
        big = int(min(free * 0.2, 2 * 2**30)) // 4
        if big > 0:
            blocks.append(torch.full((big,), float("nan"), dtype=torch.float32, device=self.device))
        self.sync()
        del blocks

    def cheat(self, check: str, message: str, **extra: Any) -> None:
        raise _Stop({"status": "cheat", "correct": False, "message": f"{check}: {message}",
                     "details": {"cheat_check": check, **extra}})

    # --- stages --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        try:
            with torch.no_grad():
                result = self._run()
        except _Stop as stop:
            result = stop.result
        details = result.setdefault("details", {})
        for k, v in self.details.items():
            details.setdefault(k, v)
        return result

    def _run(self) -> dict[str, Any]:
        from .build import BUILD_EVENTS, install_build_hooks
        from .fastpath import BUILD_STATS
        from .loader import load_candidate, load_task

        cfg = self.config
        ieee_fp32()
        self.details["protocol"] = cfg.protocol

        self.stage("load_task")
        self.task = load_task(self.req["task"])
        init = _to_device(list(self.task.get_init_inputs()), self.device)
        self.stage("build_reference")
        ref_model = self.construct(self.task.Model, init)

        self.stage("reference_forward")
        x0 = self.fresh_inputs(cfg.seed)
        rec_ref = OpRecorder()
        with rec_ref:
            ref0 = ref_model(*_clone(x0))
        self.sync()
        ref_out0 = flatten_outputs(ref0)
        out_bytes = [o.numel() * o.element_size() for o in ref_out0 if isinstance(o, torch.Tensor)]
        ref_x = _clone(x0)
        ref_alias = aliases_inputs(flatten_outputs(ref_model(*ref_x)), ref_x)
        self.sync()
        in_dtypes = _float_dtypes(x0) | _float_dtypes(ref_out0)
        task_fp32 = bool(in_dtypes) and in_dtypes <= {torch.float32}
        self.details["task_dtype"] = ("fp32" if task_fp32 else "mixed" if len(in_dtypes) > 1
                                      else str(next(iter(in_dtypes), "none")).replace("torch.", ""))
        self.details["reference_ops"] = dict(rec_ref.record.ops)

        # ---- candidate import and build (tamper snapshot first) ----
        tamper = Tamper.snapshot()
        self.stage("import_candidate")
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
        found = tamper.check()
        if found:
            self.cheat(*found, when="after import")

        self.stage("construct_candidate")
        try:
            cand_model = self.construct(model_cls, init)
        except BaseException as exc:  # noqa: BLE001
            status, message, sticky, build_log = classify_exception(exc)
            self.sticky = sticky
            return {"status": status, "correct": False, "message": f"{message} (constructing ModelNew)",
                    "build_log": build_log}

        # ---- first forward: ops, output type, aliasing ----
        self.stage("first_forward")
        cx = _clone(x0)
        pristine = _clone(x0)
        self.poison(out_bytes)
        rec_c = OpRecorder()
        with rec_c:
            out0 = self.call(cand_model, cx, "the first candidate forward")
        self.details["candidate_ops"] = dict(rec_c.record.ops)
        flat0 = flatten_outputs(out0)
        found = output_problems(flat0, cx, reference_aliases=ref_alias)
        if found:
            self.cheat(*found)
        cmp = compare_outputs(ref0, out0, cfg)
        if not cmp.ok:
            raise _Stop({"status": cmp.status, "correct": False, "message": f"trial 0: {cmp.message}",
                         "details": cmp.details | {"trial": 0}})
        warnings: list[str] = []
        found = judge_ops(rec_ref.record, rec_c.record, policy=cfg.library_policy, task_is_fp32=task_fp32,
                          torch_ops=cfg.torch_ops, warnings=warnings)
        if warnings:
            self.details["warnings"] = warnings
        if found:
            self.cheat(*found)
        ref_mutates = any(isinstance(a, torch.Tensor) and not torch.equal(a, b)
                          for a, b in zip(ref_x, x0, strict=True))
        if not ref_mutates and any(isinstance(a, torch.Tensor) and not torch.equal(a, b)
                                   for a, b in zip(cx, pristine, strict=True)):
            self.cheat("input_mutated", "candidate wrote into its input tensors")
        del pristine, ref_x

        # ---- pointer-keyed cache probe: same tensors, new values ----
        self.stage("pointer_probe")
        new_vals = self.fresh_inputs(cfg.seed + 1000)
        for dst, src in zip(cx, new_vals, strict=True):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        ref_new = ref_model(*_clone(new_vals))
        self.poison(out_bytes)
        out_same = self.call(cand_model, cx, "the pointer-cache probe")
        cmp = compare_outputs(ref_new, out_same, cfg)
        if not cmp.ok:
            stale = compare_outputs(out0, out_same, cfg).ok and not compare_outputs(ref0, ref_new, cfg).ok
            if stale:
                self.cheat("pointer_cache", "candidate returned its previous output for the same input "
                           "pointers after the input values changed")
            raise _Stop({"status": cmp.status, "correct": False,
                         "message": f"same-pointer trial: {cmp.message}", "details": cmp.details})
        del out0, out_same, ref_new, cx, new_vals, ref0

        # ---- correctness trials: fresh seeds, both orders, poisoned outputs ----
        worst: dict[str, float] = {}
        last_inputs: list[Any] = []
        last_out: Any = None
        for trial in range(cfg.correctness_trials):
            self.stage(f"correctness_trial_{trial}")
            xs = self.fresh_inputs(cfg.seed + 1 + trial)
            rx, cx = _clone(xs), _clone(xs)
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
            del rx, cx
        self.details["errors"] = worst

        # ---- determinism re-runs on identical inputs ----
        self.stage("determinism")
        ref_o, first = last_out
        tight = copy.copy(cfg)
        float_outs = [o for o in flatten_outputs(ref_o) if isinstance(o, torch.Tensor) and o.is_floating_point()]
        out_dtype = str(float_outs[0].dtype).replace("torch.", "") if float_outs else "float32"
        tight.atol, tight.rtol = (t * 0.1 for t in cfg.tolerance(out_dtype))
        bitwise = True
        for r in range(cfg.determinism_reruns):
            self.poison(out_bytes)
            again = self.call(cand_model, _clone(last_inputs), f"determinism re-run {r + 1}")
            for a, b in zip(flatten_outputs(first), flatten_outputs(again), strict=False):
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
                    bitwise = bitwise and torch.equal(a, b)
            cmp = compare_outputs(first, again, tight)
            if not cmp.ok:
                raise _Stop({"status": "nondeterministic", "correct": False,
                             "message": f"re-run {r + 1} on identical inputs differs: {cmp.message}",
                             "details": cmp.details})
            del again
        self.details["bitwise_deterministic"] = bitwise

        # ---- second shape set ----
        if cfg.alt_shapes and cfg.shapes != "none":
            self.stage("alt_shapes")
            self.alt_shape_check(model_cls, ref_model, cand_model, init, timing.tensor_bytes(x0))
        else:
            self.details["alt_shapes"] = f"skipped: the protocol's shapes = {cfg.shapes!r}"

        # ---- precision: against a float64 reference (fp32 tasks) ----
        if cfg.check_fp64 and task_fp32:
            self.stage("precision_fp64")
            self.precision_check(ref_model, last_inputs, ref_o, first)

        self.stage("tamper_check")
        found = tamper.check()
        if found:
            self.cheat(*found, when="after the candidate's forwards")
        del last_out, ref_o, first

        result: dict[str, Any] = {"status": "ok", "correct": True, "message": "correct"}
        if cfg.time:
            self.stage("timing")
            result.update(self.time_models(ref_model, cand_model, last_inputs))
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
                        alt_init = _to_device(list(task.get_init_inputs()), self.device)
                    ref_m = self.construct(task.Model, alt_init)
                torch.manual_seed(cfg.seed + 77)
                with self.on_device():
                    xs = _to_device(list(task.get_inputs_alt() if plan.sizes == {} and not plan.rebuild
                                         else task.get_inputs()), self.device)
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
        return model.to(self.device) if isinstance(model, torch.nn.Module) else model

    # --- precision -----------------------------------------------------------------------------
    def precision_check(self, ref_model: Any, inputs: list[Any], ref_out: Any, cand_out: Any) -> None:
        try:
            m64 = copy.deepcopy(ref_model).double()
            x64 = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else
                   v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in inputs]
            out64 = m64(*x64)
            self.sync()
            del m64, x64
            e_ref = max_normalized_error(out64, ref_out)
            e_cand = max_normalized_error(out64, cand_out)
            del out64
        except Exception as exc:  # noqa: BLE001 - no float64 path, or no room for it: skip, say so
            self.details["fp64_check"] = f"skipped: {type(exc).__name__}: {str(exc)[:200]}"
            if self.cuda:
                torch.cuda.empty_cache()
            return
        self.details["fp64_error"] = {"reference": e_ref, "candidate": e_cand}
        if e_cand > max(32 * e_ref, 2e-5) and self.config.allow_tf32:
            self.details.setdefault("warnings", []).append(
                f"candidate error against float64 is {e_cand:.3g} (reference {e_ref:.3g}): reduced precision, "
                f"accepted by protocol {self.config.protocol!r}")
        elif e_cand > max(32 * e_ref, 2e-5):
            self.cheat("precision_downcast", f"candidate error against a float64 reference is {e_cand:.3g}, "
                       f"the fp32 reference's is {e_ref:.3g}: the candidate computes in lower precision "
                       "(fp16/bf16/tf32) inside a fp32 task")

    # --- timing --------------------------------------------------------------------------------
    def time_models(self, ref_model: Any, cand_model: Any, inputs: list[Any]) -> dict[str, Any]:
        """Interleaved timing under PyTorch's default backend settings (cuDNN TF32 on, as shipped).

        When the reference runs a cuDNN convolution, the eager reference is also timed with TF32 off
        (IEEE fp32); both are reported when they differ by more than 5 %. Each function gets
        ``timing_trials`` calls at most, ``min_timing_trials`` at least, and stops once its calls have
        used ``timing_budget_s``.
        """
        cfg = self.config
        in_bytes = timing.tensor_bytes(inputs)
        budget = (torch.cuda.mem_get_info(self.device)[0] * 0.25) if self.cuda else 4 * 2**30
        n_rot = max(1, min(cfg.rotate_inputs, int(budget // max(1, 2 * in_bytes))))
        sets = {"reference": [_clone(inputs) for _ in range(n_rot)],
                "candidate": [_clone(inputs) for _ in range(n_rot)]}
        fns: dict[str, Any] = {"reference": lambda xs: ref_model(*xs), "candidate": lambda xs: cand_model(*xs)}
        ref_ops = self.details.get("reference_ops") or {}
        if self.cuda and any("conv" in op for op in ref_ops):
            def ieee(xs: Sequence[Any]) -> Any:
                torch.backends.cudnn.allow_tf32 = False
                try:
                    return ref_model(*xs)
                finally:
                    torch.backends.cudnn.allow_tf32 = PYTORCH_DEFAULTS["cudnn_tf32"]

            fns["reference_ieee"] = ieee
            sets["reference_ieee"] = sets["reference"]
        compile_note = None
        if cfg.baseline == "compile":
            try:
                compiled = torch.compile(ref_model)
                fns["compile"] = lambda xs: compiled(*xs)
                sets["compile"] = [_clone(inputs) for _ in range(n_rot)]
            except Exception as exc:  # noqa: BLE001
                compile_note = f"torch.compile failed: {exc}"
        flusher = timing.L2Flusher(self.device, cfg.l2_flush_mb) if self.cuda else None
        try:
            with backend_flags(**PYTORCH_DEFAULTS):
                if self.cuda:
                    samples = timing.time_interleaved(fns, sets, trials=cfg.timing_trials, warmup=cfg.warmup,
                                                      flusher=flusher,  # type: ignore[arg-type]
                                                      budget_s=cfg.timing_budget_s,
                                                      min_trials=cfg.min_timing_trials)
                else:
                    samples = _time_cpu(fns, sets, min(cfg.timing_trials, max(cfg.min_timing_trials, 20)),
                                        cfg.warmup)
        except _Stop:
            raise
        except BaseException as exc:  # noqa: BLE001
            status, message, sticky, build_log = classify_exception(exc)
            self.sticky = sticky
            raise _Stop({"status": status, "correct": False, "message": f"{message} (while timing)"}) from exc
        cand = samples["candidate"].summary()
        ref = samples["reference"].summary()
        out: dict[str, Any] = {
            "candidate_ms": cand["median_ms"], "baseline_ms": ref["median_ms"],
            "candidate_iqr_ms": cand["iqr_ms"], "baseline_iqr_ms": ref["iqr_ms"],
            "speedup": ref["median_ms"] / cand["median_ms"] if cand["median_ms"] > 0 else None,
        }
        self.details["timing"] = {"candidate": cand, "reference": ref, "rotated_input_sets": n_rot,
                                  "trials": int(cand["trials"]), "max_trials": cfg.timing_trials,
                                  "budget_s": cfg.timing_budget_s, "warmup": cfg.warmup,
                                  "backend_settings": "pytorch_default (cudnn tf32 on, matmul tf32 off)"}
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
            self.details["speedup_vs_compile"] = comp["median_ms"] / cand["median_ms"]
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
            self.speed_of_light(inputs, ref_model, cand["median_ms"], in_bytes)
        return out

    def speed_of_light(self, inputs: list[Any], ref_model: Any, cand_ms: float, in_bytes: int) -> None:
        with torch.no_grad():
            outs = flatten_outputs(ref_model(*_clone(inputs)))
        out_bytes = timing.tensor_bytes(outs)
        facts = gpu_facts(torch.cuda.get_device_name(self.device))
        l2 = int(getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or L2_BYTES)
        moved = in_bytes + max(0, out_bytes - l2)
        flops = timing.count_flops(lambda: ref_model(*_clone(inputs)))
        dtype = "float32" if self.details.get("task_dtype") == "fp32" else "bfloat16"
        bw = float(facts.get("copy_tb_s", timing.PEAK_BYTES_PER_S / 1e12)) * 1e12
        if dtype == "float32":  # error-compensated TF32 on tensor cores is a legitimate fp32-accurate route
            fp32, tf32 = facts.get("fp32_tflops"), facts.get("tf32_tflops")
            rate = timing.fp32_accurate_flops(float(fp32) * 1e12 if fp32 else timing.PEAK_FLOPS["float32"],
                                              float(tf32) * 1e12 if tf32 else timing.PEAK_TF32_FLOPS)
        else:
            peak = facts.get("bf16_tflops")
            rate = float(peak) * 1e12 if peak else None
        floor = timing.speed_of_light_ms(moved, flops, dtype, bytes_per_s=bw, flops_per_s=rate)
        self.details["speed_of_light"] = {"floor_ms": floor, "bytes": moved, "flops": flops,
                                          "bytes_per_s": bw, "gpu": facts.get("name", "unknown"),
                                          "fraction_of_floor": floor / cand_ms if cand_ms > 0 else math.inf}
        if floor >= 0.01 and cand_ms < self.config.sol_fail_fraction * floor:
            self.cheat("speed_of_light", f"{cand_ms:.4g} ms is below half the speed-of-light floor "
                       f"{floor:.4g} ms ({moved / 1e6:.1f} MB at {bw / 1e12:.2g} TB/s, {flops / 1e9:.1f} GFLOP)")


def _time_cpu(fns: dict[str, Any], sets: dict[str, list[Any]], trials: int, warmup: int) -> dict[str, Any]:
    for name, fn in fns.items():
        for w in range(max(1, warmup)):
            fn(sets[name][w % len(sets[name])])
    samples = {n: timing.Samples([], []) for n in fns}
    names = list(fns)
    for i in range(trials):
        for name in names if i % 2 == 0 else reversed(names):
            t0 = timing._perf()
            fns[name](sets[name][i % len(sets[name])])
            ms = (timing._perf() - t0) * 1e3
            samples[name].event_ms.append(ms)
            samples[name].wall_ms.append(ms)
    return samples


def profile_target(req: dict[str, Any], stage: Stage) -> dict[str, Any]:
    """One forward between cudaProfilerStart/Stop (after a warm-up), for ncu."""
    from .build import install_build_hooks
    from .loader import load_candidate, load_task

    cfg = EvalConfig.from_dict(req["config"])
    device = torch.device("cuda", 0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    stage("load_task")
    task = load_task(req["task"])
    init = _to_device(list(task.get_init_inputs()), device)
    torch.manual_seed(cfg.seed)
    if req.get("target") == "reference":
        model = task.Model(*init).to(device)
    else:
        install_build_hooks(fast_headers=cfg.fast_headers)
        stage("import_candidate")
        cls = load_candidate(req["candidate"], req["kind"])
        model = cls(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
    torch.manual_seed(cfg.seed)
    xs = _to_device(list(task.get_inputs()), device)
    stage("warmup")
    model(*xs)
    torch.cuda.synchronize()
    stage("profiled_forward")
    torch.cuda.cudart().cudaProfilerStart()
    model(*xs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return {"status": "ok", "correct": False, "message": "profiled one forward"}


__all__ = ["Evaluation", "profile_target", "statistics"]
