"""The parent side of the harness: build candidates (in parallel, CPU only, cached by source hash),
then evaluate them on the GPU, each in its own worker process.

``evaluate(task, candidate, config)`` is the one-candidate entry point; :class:`LocalEvaluator`
evaluates many (a scheduler thread per visible GPU, builds first on a CPU pool). Anything that
offers ``submit(jobs) -> list[EvalResult]`` is an :class:`Evaluator` (a Ray backend can slot in).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kernelskill.errors import KernelskillError

from . import compile_baseline
from .build import build_key, default_cache_root, read_record, write_record
from .fastpath import default_arch
from .isolation import NAMESPACES
from .isolation import WARNING as ISOLATION_WARNING
from .isolation import available as available_isolation
from .loader import inspect_candidate, inspect_task
from .preflight import HarnessUnavailable, check_machine
from .results import (
    CHEAT,
    COMPILE_ERROR,
    OK,
    OOM,
    RUNTIME_ERROR,
    TIMEOUT,
    BuildResult,
    EvalConfig,
    EvalResult,
    trim_log,
)
from .sandbox import ENTRY_PARTS, PER_JOB_ENV, WorkerOutcome, run_worker

log = logging.getLogger(__name__)


@dataclass
class EvalJob:
    task: str
    candidate: str
    config: EvalConfig | None = None
    tag: str = ""


class Evaluator(Protocol):
    def submit(self, jobs: Sequence[EvalJob]) -> list[EvalResult]: ...


def _cache_root(config: EvalConfig) -> Path:
    root = Path(config.cache_dir).expanduser() if config.cache_dir else default_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    return root


def _build_env(config: EvalConfig, key: str) -> dict[str, str]:
    """The build settings of a worker (the entry's own folders are set by :func:`.sandbox.run_worker`)."""
    root = _cache_root(config)
    return {
        # built once per box, shared by every candidate: written by build workers only
        "KERNELSKILL_HARNESS_TRAMPOLINE_DIR": str(root / "box" / "trampoline"),
        "KERNELSKILL_HARNESS_HOST_PCH_DIR": str(root / "box" / "host_pch"),
        "KERNELSKILL_HARNESS_CACHE_ROOT": str(root),
        "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST", _arch_list(default_arch())),
        "MAX_JOBS": os.environ.get("MAX_JOBS", "4"),
    }


def _arch_list(arch: str) -> str:
    digits = arch.replace("sm_", "")
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else "9.0"


#: text that means a Python candidate compiles something when imported (else no build step runs)
BUILD_MARKERS = ("load_inline", "cpp_extension", "CudaModule", "fastpath", "compile_cubin", "nvrtc", "nvcc",
                 "cupy", "ctypes")

#: markers of a slow (C++ extension) build, which is worth a separate parallel CPU phase
HEAVY_MARKERS = ("load_inline", "cpp_extension", "cupy", "nvrtc")

_PCH_LOCK = threading.Lock()
_PCH_STATE: dict[str, Any] = {}


def ensure_pch(config: EvalConfig, sources: Sequence[str]) -> None:
    """Precompile torch/extension.h once per process when a load_inline candidate is about to build."""
    if not (config.use_pch or os.environ.get("KERNELSKILL_HARNESS_PCH")) or os.environ.get("KERNELSKILL_HARNESS_NO_PCH"):
        return
    if not any("load_inline" in s or "cpp_extension" in s for s in sources):
        return
    with _PCH_LOCK:
        if "done" in _PCH_STATE:
            return
        from .build import prepare_pch

        ok, message = prepare_pch()
        _PCH_STATE.update(done=True, ok=ok, message=message)
        log.info("precompiled header: %s", message)


def build(candidate: str | Path, config: EvalConfig | None = None) -> BuildResult:
    """Build one candidate on the CPU (GPU hidden) into the folder of its source hash."""
    cfg = config or EvalConfig()
    path, source, kind = inspect_candidate(candidate)
    check_machine(source, kind, building=True)  # a missing nvcc is not the candidate's compile error
    key = build_key(source, arch=default_arch(), fast_headers=cfg.fast_headers)
    ensure_pch(cfg, [source])
    folder = _cache_root(cfg) / key
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "build.json"
    checked = available_isolation() == NAMESPACES  # only then can no worker write the entry's files
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per key at a time; the second waits and hits
        data, problem = read_record(record, folder, parts=ENTRY_PARTS, check_files=checked)
        if data is not None:
            return BuildResult(ok=bool(data.get("ok")), key=key, cached=True, seconds=0.0, log=str(data.get("log", "")),
                               message=str(data.get("message", "")), status=str(data.get("status", OK)),
                               deferred=bool(data.get("deferred", False)))
        if problem:  # a tampered or broken entry: rebuilt from nothing, never trusted, never a traceback
            log.warning("build cache entry %s: %s; rebuilding it", key, problem)
            record.unlink(missing_ok=True)
            for part in ENTRY_PARTS:
                shutil.rmtree(folder / part, ignore_errors=True)
        if kind == "python" and not any(m in source for m in BUILD_MARKERS):
            br = BuildResult(ok=True, key=key, message="nothing to build (no load_inline / fast-path kernels)")
            write_record(record, folder, br.to_dict(), parts=ENTRY_PARTS)
            return br
        if kind == "python" and not cfg.prebuild_fastpath and not any(m in source for m in HEAVY_MARKERS):
            # fast-path kernels compile at import in ~0.4 s (cached by hash): a build worker would cost more
            br = BuildResult(ok=True, key=key, deferred=True,
                             message="fast-path kernels compile when the GPU worker imports the candidate")
            write_record(record, folder, br.to_dict(), parts=ENTRY_PARTS)
            return br
        env = _build_env(cfg, key) | {"CUDA_VISIBLE_DEVICES": ""}
        box = [str(_cache_root(cfg) / "box")]
        start = time.monotonic()
        # a ready build worker (torch imported while the previous build ran) saves the import of each cold
        # build; like the evaluation's, it runs no code before its one job. CUDA stays hidden from it.
        outcome = run_worker({"mode": "build", "candidate": str(path.resolve()), "kind": kind,
                              "config": cfg.to_dict()}, timeout_s=cfg.build_timeout_s,
                             max_rss_gb=cfg.max_rss_gb, env_extra=env, cache_entry=folder, export_entry=True,
                             writable=box, ready_key=_ready_key(env, box) if cfg.ready_workers else None)
        seconds = time.monotonic() - start
        res = outcome.result or {}
        if outcome.timed_out:
            br = BuildResult(ok=False, key=key, seconds=seconds, status=TIMEOUT,
                             message=f"build exceeded {cfg.build_timeout_s:.0f} s",
                             log=trim_log(outcome.stderr_tail))
        elif outcome.forged:
            br = BuildResult(ok=False, key=key, seconds=seconds, status=RUNTIME_ERROR,
                             message=f"the build worker's verdict was forged: {outcome.forged}",
                             log=trim_log(outcome.stderr_tail))
        elif not res:
            br = BuildResult(ok=False, key=key, seconds=seconds, status=RUNTIME_ERROR,
                             message=f"build worker died ({outcome.signal_name or outcome.returncode})",
                             log=trim_log(outcome.stderr_tail))
        else:
            br = BuildResult(ok=bool(res.get("ok")), key=key, seconds=seconds, log=str(res.get("log", "")),
                             message=str(res.get("message", "")), status=str(res.get("status", OK)),
                             deferred=bool(res.get("deferred")))
        if br.status in (OK, COMPILE_ERROR) and outcome.extra.get("entry_kept", True):
            # deterministic outcomes are cached, with the hash of the record and of every file of the entry
            write_record(record, folder, br.to_dict() | {"events": res.get("events", []),
                                                         "fastpath": res.get("fastpath", [])}, parts=ENTRY_PARTS)
        return br


def build_many(candidates: Sequence[str | Path], config: EvalConfig | None = None,
               jobs: int | None = None) -> list[BuildResult]:
    """Build several candidates at once (CPU), before any GPU work."""
    cfg = config or EvalConfig()
    n = jobs or max(1, min(len(candidates), (os.cpu_count() or 2) * 3 // 4))
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(lambda c: build(c, cfg), candidates))


def _outcome_to_result(outcome: WorkerOutcome, cfg: EvalConfig, budget_s: float) -> EvalResult:
    info = {"worker_seconds": round(outcome.seconds, 3), "worker_returncode": outcome.returncode,
            "peak_rss_mb": outcome.peak_rss_mb, "isolation": outcome.isolation}
    if outcome.identity:  # who the sandbox's root was on the host (unprivileged where kernelskill runs as root)
        info["sandbox_identity"] = outcome.identity
    if outcome.isolation != NAMESPACES:
        info["isolation_warning"] = ISOLATION_WARNING
    if outcome.forged:  # whatever else happened: the candidate tried to write its own verdict
        return EvalResult(status=CHEAT, message=f"forged_result: {outcome.forged}",
                          details=info | {"cheat_check": "forged_result", "stage": outcome.stage,
                                          "stderr_tail": outcome.stderr_tail[-1500:]})
    if outcome.timed_out:
        return EvalResult(status=TIMEOUT, message=f"no result within {budget_s:.0f} s (during {outcome.stage}); "
                          "the worker's process group was killed", details=info | {"stage": outcome.stage})
    if outcome.rss_killed:
        return EvalResult(status=OOM, message=f"host memory above {cfg.max_rss_gb:g} GB (during {outcome.stage})",
                          details=info | {"stage": outcome.stage})
    res = outcome.result
    if res is None:
        tail = outcome.stderr_tail.lower()
        sig = outcome.signal_name or f"exit code {outcome.returncode}"
        status = RUNTIME_ERROR
        if "illegal memory access" in tail or "illegal address" in tail:
            status = "illegal_memory_access"
        why = f"; {outcome.channel_problem}" if outcome.channel_problem else ""
        return EvalResult(status=status, message=f"worker died ({sig}) during {outcome.stage or 'start-up'}{why}",
                          details=info | {"stage": outcome.stage, "stderr_tail": outcome.stderr_tail[-1500:]})
    details = dict(res.get("details") or {})
    details.update(info)
    if outcome.returncode not in (0, None):
        details["worker_exit"] = outcome.returncode
    fields = {f.name for f in dataclasses.fields(EvalResult)}
    data = {k: v for k, v in res.items() if k in fields and k != "details"}
    data.setdefault("status", RUNTIME_ERROR)
    return EvalResult(**data, details=details)


def run_candidate(task: str | Path, candidate: str | Path, config: EvalConfig | None = None, *,
                  built: BuildResult | None = None, gpu: int | None = None) -> EvalResult:
    """The GPU phase for a candidate that has been built (or whose build is deferred).

    With the torch.compile baseline on a GPU (``compile_baseline == "once"``), the baseline comes from the
    store (measured first when missing, :func:`compile_baseline_record`) and the candidate's worker times
    eager only; the compile figures are derived from both. When the baseline cannot be measured, the
    candidate's worker compiles the reference itself, as with ``"inline"``, and ``details["compile_baseline"]``
    says why."""
    cfg = config or EvalConfig()
    tpath = inspect_task(task).path
    cpath, source, kind = inspect_candidate(candidate)
    check_machine(source, kind)
    if built is None:
        built = build(cpath, cfg)
    if not built.ok:
        return EvalResult(status=built.status if built.status != OK else COMPILE_ERROR, message=built.message,
                          build_log=built.log, details={"build_key": built.key, "build_cached": built.cached,
                                                        "isolation": available_isolation()},
                          task=str(task), candidate=str(candidate), protocol=cfg.protocol, precision=cfg.precision)
    device = gpu if gpu is not None else cfg.device
    record, measured_now, note = None, False, ""
    if compile_baseline.applies(cfg, _device_type()):
        record, measured_now, note = compile_baseline_record(tpath, cfg, device)
    worker_cfg = dataclasses.replace(cfg, baseline="eager") if record is not None else cfg
    result = _evaluate_in_worker(tpath, cpath, kind, worker_cfg, built, device)
    result.task, result.candidate = str(task), str(candidate)
    if record is not None:
        compile_baseline.apply_record(result, record, measured_now=measured_now)
    elif note:
        result.details["compile_baseline"] = note
    return result


def _evaluate_in_worker(tpath: Path, cpath: Path, kind: str, cfg: EvalConfig, built: BuildResult,
                        device: int | None) -> EvalResult:
    """One evaluation worker on ``device`` for a built candidate."""
    env = _build_env(cfg, built.key)
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device)
    budget = cfg.run_timeout_s + (cfg.build_timeout_s if built.deferred else 0.0)
    outcome = run_worker({"mode": "evaluate", "task": str(tpath.resolve()), "candidate": str(cpath.resolve()),
                          "kind": kind, "config": cfg.to_dict(), "device_type": _device_type()},
                         timeout_s=budget, max_rss_gb=cfg.max_rss_gb, env_extra=env,
                         cache_entry=_cache_root(cfg) / built.key,
                         keep_workdir=cfg.keep_workdir, ready_key=_ready_key(env, []) if cfg.ready_workers else None)
    result = _outcome_to_result(outcome, cfg, budget)
    result.task, result.candidate, result.protocol = str(tpath), str(cpath), cfg.protocol
    result.precision = cfg.precision
    result.details.update(build_key=built.key, build_cached=built.cached, build_seconds=round(built.seconds, 3),
                          build_deferred=built.deferred, device=device)
    return result


#: baseline keys whose measurement failed in this process -> the note (not measured again in this process;
#: never stored, since a timeout may not repeat)
_BASELINE_FAILED: dict[str, str] = {}


def compile_baseline_store(config: EvalConfig) -> compile_baseline.BaselineStore:
    """The torch.compile baseline store of this config's cache root (written by the parent only)."""
    return compile_baseline.BaselineStore(_cache_root(config) / compile_baseline.STORE_DIR)


def compile_baseline_record(task: Path, config: EvalConfig, device: int | None
                            ) -> tuple[dict[str, Any] | None, bool, str]:
    """(record, measured now, note): the task's stored baseline, measured first when missing; (None, False,
    a one-line note) when it cannot be had (the candidate's worker then compiles the reference itself)."""
    fallback = "torch.compile was timed in this candidate's worker instead"
    try:
        task_bytes = Path(task).read_bytes()
        env = compile_baseline.environment(device)
        key = compile_baseline.baseline_key(task_bytes, config, env)
        store = compile_baseline_store(config)
        with store.lock(key):
            record = store.get(key)
            if record is not None:
                return record, False, ""
            if key in _BASELINE_FAILED:
                return None, False, _BASELINE_FAILED[key]
            record, why = measure_compile_baseline(task, task_bytes, config, device, key=key, env=env, store=store)
            if record is not None:
                store.put(record)
                return record, True, ""
            _BASELINE_FAILED[key] = f"compile baseline worker failed ({why}): {fallback}"
            return None, False, _BASELINE_FAILED[key]
    except Exception as exc:  # noqa: BLE001 - the candidate is still evaluated, the compile baseline inline
        log.warning("compile baseline for %s: %s: %s", task, type(exc).__name__, exc)
        first = (str(exc).splitlines() or [""])[0][:200]
        return None, False, f"compile baseline unavailable ({type(exc).__name__}: {first}): {fallback}"


def measure_compile_baseline(task: Path, task_bytes: bytes, config: EvalConfig, device: int | None, *, key: str,
                             env: compile_baseline.Environment, store: compile_baseline.BaselineStore
                             ) -> tuple[dict[str, Any] | None, str]:
    """Time eager and torch.compile of the task's own Model in an evaluation worker that runs no candidate:
    its candidate is the task's source with ``ModelNew = Model``, written here. (record, "") or (None, why)."""
    source = store.write_source(key, compile_baseline.baseline_source(task_bytes.decode("utf-8")))
    bcfg = compile_baseline.baseline_config(config)
    built = build(source, bcfg)
    if not built.ok:
        return None, f"{built.status}: {built.message.splitlines()[0][:200] if built.message else ''}"
    start = time.monotonic()
    result = _evaluate_in_worker(Path(task), source, "python", bcfg, built, device)
    record, why = compile_baseline.record_from_result(result, key=key, env=env, task_bytes=task_bytes,
                                                      config=config)
    log.info("compile baseline of %s on %s: %s in %.1f s", Path(task).name, env.gpu,
             f"eager {record['eager_ms']:.4g} ms, torch.compile {record['compile_ms']:.4g} ms" if record else why,
             time.monotonic() - start)
    return record, why


def seed_compile_baselines(task: str | Path, config: EvalConfig, records: Iterable[Any], *,
                           device: int | None = None) -> int:
    """Store records measured elsewhere (a run's eval events: ``details.timing.compile.measured``) whose key is
    the one this machine computes now for ``task`` and ``config``; any other record is passed over (another
    GPU, torch, triton, task or timing setting). Returns how many were written (0 or 1)."""
    if not (config.baseline == "compile" and config.compile_baseline == "once"):
        return 0
    task_bytes, env = Path(task).read_bytes(), compile_baseline.environment(device)
    key = compile_baseline.baseline_key(task_bytes, config, env)
    store = compile_baseline_store(config)
    with store.lock(key):
        return compile_baseline.seed_store(store, records, key,
                                           legacy=compile_baseline.legacy_key(task_bytes, config, env))


def _ready_key(env: dict[str, str], writable: list[str]) -> str:
    """Jobs with the same device, cache folders and write access can take each other's ready worker."""
    return json.dumps({k: v for k, v in sorted(env.items()) if k not in PER_JOB_ENV} | {"": sorted(writable)})


def _device_type() -> str:
    forced = os.environ.get("KERNELSKILL_HARNESS_DEVICE")
    if forced:
        return forced
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


def evaluate(task: str | Path, candidate: str | Path, config: EvalConfig | None = None) -> EvalResult:
    """Build (cached), check and time one candidate against its task, isolated in worker processes."""
    cfg = config or EvalConfig()
    inspect_task(task)  # a broken task is the user's error: raise
    check_candidate(candidate)
    try:
        built = build(candidate, cfg)
    except HarnessUnavailable:
        raise
    except KernelskillError as exc:  # a candidate that does not parse is a compile error, not a crash
        return EvalResult(status=COMPILE_ERROR, message=str(exc), task=str(task), candidate=str(candidate),
                          protocol=cfg.protocol, precision=cfg.precision)
    return run_candidate(task, candidate, cfg, built=built)


def check_candidate(candidate: str | Path) -> None:
    """Raise HarnessUnavailable when this machine cannot run the candidate (nothing is built or cached)."""
    try:
        _path, source, kind = inspect_candidate(candidate)
    except KernelskillError:
        return  # the candidate's own problem: reported as its compile error
    check_machine(source, kind)


def visible_gpus() -> list[int]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip() == "":
        return []
    try:
        import torch

        n = torch.cuda.device_count()
    except ImportError:  # pragma: no cover
        n = 0
    if env:
        ids = [int(x) for x in env.split(",") if x.strip().isdigit()]
        return ids[:n] if n else ids
    return list(range(n))


class LocalEvaluator:
    """Builds every job on a CPU pool first, then runs them through one scheduler thread per GPU.

    Each candidate runs in its own fresh worker process pinned to that GPU, so a sticky CUDA error or
    a hang costs one job, never the queue. With no GPU, jobs run one at a time on the CPU device.
    """

    def __init__(self, config: EvalConfig | None = None, gpus: Sequence[int] | None = None,
                 build_jobs: int | None = None,
                 on_result: Callable[[int, EvalResult], None] | None = None, slots_per_gpu: int = 1) -> None:
        self.config = config or EvalConfig()
        self.gpus = list(gpus) if gpus is not None else visible_gpus()
        self.build_jobs = build_jobs
        self.on_result = on_result
        self.slots_per_gpu = max(1, slots_per_gpu)  # >1 only for classification runs: timing shares the GPU

    def submit(self, jobs: Sequence[EvalJob]) -> list[EvalResult]:
        for job in jobs:  # a machine that cannot run them fails the whole submit, before any build
            check_candidate(job.candidate)
        cfgs = [j.config or self.config for j in jobs]
        t0 = time.monotonic()
        n = self.build_jobs or max(1, min(len(jobs), (os.cpu_count() or 2) * 3 // 4))
        with ThreadPoolExecutor(max_workers=n) as pool:
            builds = list(pool.map(lambda jc: _safe_build(jc[0].candidate, jc[1]), zip(jobs, cfgs, strict=True)))
        build_wall = time.monotonic() - t0
        results: list[EvalResult | None] = [None] * len(jobs)
        todo: queue.Queue[int] = queue.Queue()
        for i in range(len(jobs)):
            todo.put(i)

        def worker(gpu: int | None) -> None:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                job, built = jobs[i], builds[i]
                try:
                    if isinstance(built, EvalResult):
                        res = built
                    else:
                        res = run_candidate(job.task, job.candidate, cfgs[i], built=built, gpu=gpu)
                except HarnessUnavailable as exc:  # the machine's problem (a path the sandbox cannot read)
                    res = EvalResult(status=RUNTIME_ERROR, message=str(exc), details={"harness_failure": True},
                                     task=job.task, candidate=job.candidate, protocol=cfgs[i].protocol,
                                     precision=cfgs[i].precision)
                except Exception as exc:  # noqa: BLE001 - a bad job never stops the queue
                    res = EvalResult(status=RUNTIME_ERROR, message=f"{type(exc).__name__}: {exc}",
                                     task=job.task, candidate=job.candidate, protocol=cfgs[i].protocol,
                                     precision=cfgs[i].precision)
                res.details["tag"] = job.tag
                res.details["build_phase_wall_s"] = round(build_wall, 3)
                results[i] = res
                if self.on_result is not None:
                    self.on_result(i, res)

        threads = [threading.Thread(target=worker, args=(g,), name=f"ks-gpu-{g}") for g in (self.gpus or [None])
                   for _slot in range(self.slots_per_gpu)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [r for r in results if r is not None]


def _safe_build(candidate: str, cfg: EvalConfig) -> BuildResult | EvalResult:
    try:
        return build(candidate, cfg)
    except HarnessUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. a candidate that does not parse
        return EvalResult(status=COMPILE_ERROR, message=str(exc), candidate=str(candidate), protocol=cfg.protocol,
                          precision=cfg.precision)
