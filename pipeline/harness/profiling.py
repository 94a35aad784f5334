"""Profile one forward of a candidate with Nsight Compute (every kernel, vendor ones included).

``ncu --clock-control none --print-units base --csv --page raw --profile-from-start off`` around a
worker that runs one warm-up forward and then one forward between cudaProfilerStart/Stop. Returns
the raw CSV and the parsed rows; a missing counter permission (ERR_NVGPUCTRPERM) or a missing ncu
gives a clear message instead of an exception.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import shutil
from pathlib import Path

from .api import _build_env, _cache_root, build
from .isolation import NAMESPACES, counters_admin_only
from .isolation import available as available_isolation
from .loader import inspect_candidate, inspect_task
from .results import EvalConfig, ProfileResult
from .sandbox import run_worker

#: the raw metrics behind docs/profiling.md (normalized names live in retrieval/field_map.yaml)
METRICS: tuple[str, ...] = (
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "gpu__time_duration.avg",
    "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.ratio",
    "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.ratio",
    "smsp__warp_issue_stalled_no_instruction_per_warp_active.ratio",
    "smsp__warp_issue_stalled_not_selected_per_warp_active.ratio",
    "smsp__sass_branch_targets_threads_divergent.avg",
    "smsp__sass_branch_targets_threads_uniform.avg",
    # .max_rate reads the metric's peak (32) and .avg sums over cycles (seen on the H200 with
    # ncu 2025.3.1): ask for the per-instruction ratio and the per-cycle average instead
    "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
    "smsp__warps_eligible.avg.per_cycle_active",
    # access and divergence: sectors and shared-memory wavefronts against the ideal for the same
    # instructions (ncu's source counters), L1 sectors per request, branch efficiency
    "memory_l2_theoretical_sectors_global",
    "memory_l2_theoretical_sectors_global_ideal",
    "memory_l1_wavefronts_shared",
    "memory_l1_wavefronts_shared_ideal",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "smsp__sass_average_branch_targets_threads_uniform.pct",
)

#: how ncu names a metric it does not know ("==ERROR== Failed to find metric regex:NAME")
UNKNOWN_METRIC_RE = re.compile(r"Failed to find metric\s+(?:regex:)?([A-Za-z0-9_.]+)")

log = logging.getLogger(__name__)

PERMISSION_HELP = (
    "ncu has no permission to read the GPU performance counters (ERR_NVGPUCTRPERM). Run as root, or "
    "ask the administrator to load the driver with NVreg_RestrictProfilingToAdminUsers=0 (see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM); evaluation without --profile still works."
)
#: why running kernelskill as root does not help inside the sandbox
SANDBOXED_HELP = (
    " The profiler runs inside the candidate's sandbox, where it holds no administrator right: the driver grants "
    "the counters by capability (CAP_SYS_ADMIN or CAP_PERFMON of the host), not by uid, and the sandbox drops "
    "every capability, whoever its root is."
)
ADMIN_ONLY = " This driver reports RmProfilingAdminOnly: 1 (/proc/driver/nvidia/params)."


def find_ncu() -> str | None:
    for cand in (os.environ.get("KERNELSKILL_NCU"), shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def parse_ncu_csv(text: str) -> tuple[list[dict[str, str]], dict[str, str]]:
    """``--csv --page raw``: a header row, a units row, then one row per kernel launch."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return [], {}
    reader = list(csv.reader(io.StringIO("\n".join(lines))))
    header = reader[0]
    units: dict[str, str] = {}
    body = reader[1:]
    if body and (not body[0] or body[0][0] == "" or not body[0][0].strip().isdigit()):
        units = dict(zip(header, body[0], strict=False))
        body = body[1:]
    rows = [dict(zip(header, r, strict=False)) for r in body if len(r) == len(header)]
    return rows, units


def profile(task: str | Path, candidate: str | Path, config: EvalConfig | None = None, *,
            target: str = "candidate", metrics: tuple[str, ...] = METRICS) -> ProfileResult:
    """Profile one forward of ``candidate`` (or the task's reference). The profiler and the candidate run
    in the same sandbox as an evaluation (``isolation`` says which)."""
    cfg = config or EvalConfig()
    mode = available_isolation()
    ncu = find_ncu()
    if ncu is None:
        return ProfileResult(ok=False, message="ncu (Nsight Compute) was not found: install it or set "
                             "KERNELSKILL_NCU to its path", isolation=mode)
    tpath = inspect_task(task).path
    cpath, _source, kind = inspect_candidate(candidate)
    built = build(cpath, cfg)
    if not built.ok:
        return ProfileResult(ok=False, message=f"candidate does not build: {built.message}", isolation=mode)
    env = _build_env(cfg, built.key)
    if cfg.device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(cfg.device)
    wanted, dropped = list(metrics), []
    for _attempt in range(len(metrics)):
        prefix = [ncu, "--clock-control", "none", "--print-units", "base", "--csv", "--page", "raw",
                  "--profile-from-start", "off", "--target-processes", "all", "--metrics", ",".join(wanted)]
        outcome = run_worker({"mode": "profile", "task": str(tpath.resolve()), "candidate": str(cpath.resolve()),
                              "kind": kind, "config": cfg.to_dict(), "target": target},
                             timeout_s=cfg.run_timeout_s + 300, max_rss_gb=cfg.max_rss_gb, env_extra=env,
                             command_prefix=prefix, full_output=True, cache_entry=_cache_root(cfg) / built.key)
        text = outcome.extra.get("output", outcome.stderr_tail)
        # an older or newer ncu may not know a metric: it refuses the whole run, so ask again without it
        unknown = [m for m in UNKNOWN_METRIC_RE.findall(text) if m in wanted]
        if not unknown or len(unknown) == len(wanted):
            break
        log.warning("ncu does not know %s; profiling without it", ", ".join(unknown))
        dropped += unknown
        wanted = [m for m in wanted if m not in unknown]
    mode, who = outcome.isolation, outcome.identity
    if "ERR_NVGPUCTRPERM" in text:
        return ProfileResult(ok=False, message=PERMISSION_HELP + (SANDBOXED_HELP if mode == NAMESPACES else "")
                             + (ADMIN_ONLY if counters_admin_only() else ""), csv=text, command=prefix,
                             isolation=mode, identity=who)
    if outcome.forged:
        return ProfileResult(ok=False, message=f"the profiled candidate forged a verdict: {outcome.forged}",
                             command=prefix, isolation=mode, identity=who)
    rows, units = parse_ncu_csv(text)
    if outcome.timed_out:
        return ProfileResult(ok=False, message="profiling timed out", csv=text, command=prefix, isolation=mode,
                             identity=who)
    if not rows:
        res = outcome.result or {}
        why = res.get("message") or outcome.channel_problem or f"ncu returned {outcome.returncode}"
        return ProfileResult(ok=False, message=f"no kernel rows in the ncu output ({why})", csv=text[-4000:],
                             command=prefix, isolation=mode, identity=who)
    skipped = f" (this ncu does not know {', '.join(dropped)})" if dropped else ""
    times = ((outcome.result or {}).get("details") or {}).get("stage_times_s")
    details = {"ncu_seconds": round(outcome.seconds, 3)} | ({"stage_times_s": times} if isinstance(times, dict) else {})
    return ProfileResult(ok=True, message=f"{len(rows)} kernel launch(es) profiled{skipped}", csv=text, rows=rows,
                         units=units, command=prefix, isolation=mode, identity=who, details=details)
