"""The torch.compile baseline, measured once per task, GPU and software, in a worker that runs no candidate.

``EvalConfig.baseline == "compile"`` used to compile the reference inside every candidate's worker; the
worker's /tmp is a fresh sandbox, so inductor compiled it from cold in every evaluation (6-13 s of its
8-17 s on an H100). Now (``compile_baseline == "once"``, on a CUDA device) the parent measures it once, in an
evaluation worker whose "candidate" the harness writes itself from the task (the task's source plus
``ModelNew = Model``), stores the record under a key, and times each candidate against eager only.

This module holds the pure parts: the key, the store (one JSON file per key, written atomically by the
parent), the record taken from the baseline worker's result, the figures derived from it for a candidate,
and the seeding of the store from records found elsewhere (run events). ``api.py`` runs the workers.
Standard library only; torch is imported lazily for the GPU name and version.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelskill.atomic_file import write_text_atomic

from .results import EvalConfig, EvalResult

log = logging.getLogger(__name__)

#: the measurement's method: a change of what the baseline worker does, or of what the key covers, gives every
#: key a new value (/1 also covered the seed and correctness_trials: see :data:`LEGACY_KEY_FIELDS`)
SCHEMA = "kernelskill-compile-baseline/2"
LEGACY_SCHEMA = "kernelskill-compile-baseline/1"
#: the store's folder under the harness cache root (never a folder a worker may write)
STORE_DIR = "compile_baselines"
#: EvalConfig fields that change what the reference runs or how it is timed (docs/harness.md): the precision
#: casts the task, the rest are the timing loop's own settings. Excluded: the seed and correctness_trials, which
#: choose the values of the weights and the timed inputs, not their shapes or dtypes (a dense forward takes the
#: same time on other values; a verification on another seed shares its run's baseline); the protocol
#: (tolerances, op and library policies, TF32 acceptance and the second shape set judge the candidate; both
#: baselines are timed under PyTorch's shipped settings whatever the protocol); limits, paths and the checks'
#: switches.
KEY_FIELDS = ("precision", "timing_trials", "min_timing_trials", "timing_budget_s", "timing_ci", "warmup",
              "l2_flush_mb")
#: what a /1 key covered: records of runs measured before /2 are still taken when their /1 key matches
LEGACY_KEY_FIELDS = ("precision", "seed", "correctness_trials", "timing_trials", "min_timing_trials",
                     "timing_budget_s", "timing_ci", "warmup", "l2_flush_mb")
#: how the baseline worker's config departs from the candidate's: the "candidate" is the task's own Model, so
#: the checks that judge a candidate are off (or cannot fire) and nothing irrelevant to the timing runs
BASELINE_OVERRIDES: dict[str, Any] = {
    "baseline": "compile", "compile_baseline": "inline", "time": True, "torch_ops": "warn",
    "library_policy": "allow_gemm_conv", "determinism_reruns": 0, "check_fp64": False, "alt_shapes": False,
    "sol_fail_fraction": 0.0, "side_stream_factor": 1.0, "memory_trace": False, "keep_workdir": False,
}
_KEY_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Environment:
    """The GPU and software a baseline was measured with (all three are part of the key)."""

    gpu: str
    torch: str
    triton: str


def applies(config: EvalConfig, device_type: str) -> bool:
    """Whether this evaluation takes its torch.compile figures from the once-per-task baseline."""
    return (config.baseline == "compile" and config.compile_baseline == "once" and config.time
            and device_type == "cuda")


def triton_version() -> str:
    for dist in ("triton", "pytorch-triton", "pytorch-triton-rocm", "triton-xpu"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(dist)
    return "none"


def _parent_index(device: int | None) -> int:
    """The parent's torch index of the GPU a worker gets as ``CUDA_VISIBLE_DEVICES=device``."""
    if device is None:
        return 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible.index(str(device)) if str(device) in visible else device


@functools.cache
def _gpu_name(index: int) -> str:
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    try:
        return str(torch.cuda.get_device_name(index))
    except (RuntimeError, AssertionError, ValueError):
        return str(torch.cuda.get_device_name(0))


def environment(device: int | None = None) -> Environment:
    """This machine's GPU name (the device a worker gets as ``device``), torch and triton versions."""
    import torch

    return Environment(gpu=_gpu_name(_parent_index(device)), torch=str(torch.__version__), triton=triton_version())


def key_config(config: EvalConfig, fields: tuple[str, ...] = KEY_FIELDS) -> dict[str, Any]:
    return {name: getattr(config, name) for name in fields}


def baseline_key(task_bytes: bytes, config: EvalConfig, env: Environment) -> str:
    """sha256 over the method, the task file's bytes, :data:`KEY_FIELDS` of the config and the environment."""
    return _digest(SCHEMA, task_bytes, key_config(config), env)


def legacy_key(task_bytes: bytes, config: EvalConfig, env: Environment) -> str:
    """The key a /1 harness computed for the same task, config and environment (:data:`LEGACY_KEY_FIELDS`)."""
    return _digest(LEGACY_SCHEMA, task_bytes, key_config(config, LEGACY_KEY_FIELDS), env)


def _digest(schema: str, task_bytes: bytes, fields: dict[str, Any], env: Environment) -> str:
    digest = hashlib.sha256()
    for part in (schema, hashlib.sha256(task_bytes).hexdigest(), json.dumps(fields, sort_keys=True),
                 json.dumps(dataclasses.asdict(env), sort_keys=True)):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def baseline_config(config: EvalConfig) -> EvalConfig:
    """The baseline worker's config: the candidate's, with :data:`BASELINE_OVERRIDES`."""
    return dataclasses.replace(config, **BASELINE_OVERRIDES)


def baseline_source(task_source: str) -> str:
    """The baseline worker's candidate: the task's own source, whose ``Model`` is the ``ModelNew``."""
    return (task_source.rstrip("\n") + "\n\n\n# written by the kernelskill harness: the torch.compile baseline "
            "times the task's own Model\nModelNew = Model\n")


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def valid_record(record: Any, key: str | None = None) -> bool:
    """A record the derivation can use: its key (``key`` when given), both medians positive and finite."""
    return (isinstance(record, Mapping) and isinstance(record.get("key"), str)
            and bool(_KEY_RE.fullmatch(record["key"])) and (key is None or record["key"] == key)
            and _positive(record.get("eager_ms")) and _positive(record.get("compile_ms")))


def record_from_result(result: EvalResult, *, key: str, env: Environment, task_bytes: bytes,
                       config: EvalConfig) -> tuple[dict[str, Any] | None, str]:
    """(the record, "") from the baseline worker's result, or (None, why it holds no baseline)."""
    details = result.details or {}
    timing = details.get("timing") or {}
    ref, comp = timing.get("reference") or {}, timing.get("compile") or {}
    if result.status != "ok" or not (_positive(ref.get("median_ms")) and _positive(comp.get("median_ms"))):
        why = details.get("compile_baseline") or f"{result.status}: {result.message}"
        return None, str(why).splitlines()[0][:300] if str(why).strip() else result.status
    reported = (details.get("gpu") or {}).get("name")
    if reported and reported != env.gpu:
        return None, f"the baseline worker ran on {reported!r}, the key names {env.gpu!r}"
    stages = details.get("stage_times_s") or {}
    record = {
        "schema": SCHEMA, "key": key, "eager_ms": float(ref["median_ms"]), "compile_ms": float(comp["median_ms"]),
        "eager_iqr_ms": ref.get("iqr_ms"), "compile_iqr_ms": comp.get("iqr_ms"),
        "trials": int(comp.get("trials") or ref.get("trials") or 0), "stop": timing.get("stop"),
        "gpu": env.gpu, "torch": env.torch, "triton": env.triton,
        "task_sha256": hashlib.sha256(task_bytes).hexdigest(), "config": key_config(config),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "worker_seconds": details.get("worker_seconds"),
        "timing_stage_s": (round(stages["end"] - stages["timing"], 3)
                           if _positive(stages.get("end")) and isinstance(stages.get("timing"), int | float)
                           else None),
    }
    return record, ""


def derived_figures(*, baseline_ms: float, speedup: float | None, speedup_ci: list[float] | None,
                    record: Mapping[str, Any]) -> dict[str, Any]:
    """The candidate's torch.compile figures from today's eager median and the stored baseline.

    The baseline's compiled/eager ratio ``r = compile_ms_b / eager_ms_b`` carries over to today's eager time:
    ``compile_ms = baseline_ms * r``; the speedup over torch.compile is ``compile_ms / candidate_ms = speedup
    * r``, and its interval is the eager speedup's interval times ``r`` (the baseline's own spread is not in it).
    """
    ratio = float(record["compile_ms"]) / float(record["eager_ms"])
    out: dict[str, Any] = {"compile_ms": baseline_ms * ratio, "ratio": ratio}
    if _positive(speedup):
        out["speedup_vs_compile"] = float(speedup) * ratio  # type: ignore[arg-type]
    if speedup_ci and len(speedup_ci) == 2:
        out["compile_speedup_ci"] = [None if v is None else float(v) * ratio for v in speedup_ci]
    return out


def apply_record(result: EvalResult, record: Mapping[str, Any], *, measured_now: bool) -> None:
    """Put the derived torch.compile figures into a timed candidate's result (nothing when it was not timed)."""
    if not _positive(result.baseline_ms):
        return
    fig = derived_figures(baseline_ms=float(result.baseline_ms),  # type: ignore[arg-type]
                          speedup=result.speedup, speedup_ci=result.speedup_ci, record=record)
    result.compile_ms = fig["compile_ms"]
    if "compile_speedup_ci" in fig:
        result.compile_speedup_ci = fig["compile_speedup_ci"]
    if "speedup_vs_compile" in fig:
        result.details["speedup_vs_compile"] = fig["speedup_vs_compile"]
    iqr = record.get("compile_iqr_ms")
    scale = float(result.baseline_ms) / float(record["eager_ms"])  # type: ignore[arg-type]
    timing = result.details.setdefault("timing", {})
    timing["compile"] = {"median_ms": fig["compile_ms"],
                         "iqr_ms": float(iqr) * scale if isinstance(iqr, int | float) else None,
                         "source": "baseline worker", "key": record["key"], "measured_now": measured_now,
                         "measured": dict(record)}


class BaselineStore:
    """One JSON file per key in ``folder``; written by the parent only, atomically (write, fsync, rename)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path(self, key: str) -> Path:
        if not _KEY_RE.fullmatch(key):
            raise ValueError(f"not a baseline key: {key!r}")
        return self.folder / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The record of ``key``; None when there is none, or (with a warning) when the file is unreadable,
        partial or not a record of that key: it is measured again and replaced."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.warning("compile baseline %s: unreadable (%s); it is measured again", path, exc)
            return None
        if not valid_record(data, key):
            log.warning("compile baseline %s: not a valid record of its key; it is measured again", path)
            return None
        return data

    def put(self, record: Mapping[str, Any]) -> Path:
        if not valid_record(record):
            raise ValueError("not a valid compile baseline record")
        path = self.path(str(record["key"]))
        write_text_atomic(path, json.dumps(dict(record), indent=1, sort_keys=True))
        return path

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """One measurement per key at a time (threads and processes): the second waits, then finds it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f".{self.path(key).stem}.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield

    def write_source(self, key: str, source: str) -> Path:
        """The baseline worker's candidate file (read by the worker, written here by the parent)."""
        path = self.folder / "sources" / f"{self.path(key).stem}.py"
        write_text_atomic(path, source, mode=0o644)  # as root the worker is uid 65534 and must read it
        return path


def seed_store(store: BaselineStore, records: Iterable[Any], key: str, legacy: str | None = None) -> int:
    """Store the first valid record of ``key`` among ``records`` when the store has none; records of other
    keys (another GPU, torch, triton, task or timing setting) are passed over. A record filed under ``legacy``
    (the /1 key of the same task, config and environment) is stored under ``key``, its old key kept in
    ``legacy_key``: it measured what a /2 record measures. Returns how many were written."""
    if store.get(key) is not None:
        return 0
    records = list(records)
    for record in records:
        if valid_record(record, key):
            store.put(record)
            return 1
    for record in records:
        if legacy is not None and valid_record(record, legacy):
            store.put({**record, "key": key, "schema": SCHEMA, "legacy_key": legacy})
            return 1
    return 0


__all__ = ["BASELINE_OVERRIDES", "KEY_FIELDS", "LEGACY_KEY_FIELDS", "LEGACY_SCHEMA", "SCHEMA", "STORE_DIR",
           "BaselineStore", "Environment", "applies", "apply_record", "baseline_config", "baseline_key",
           "baseline_source", "derived_figures", "environment", "legacy_key", "record_from_result", "seed_store",
           "valid_record"]
