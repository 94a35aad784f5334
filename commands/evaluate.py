"""``kernelskill eval TASK KERNEL``: build, check, time (and optionally profile) one candidate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from kernelskill.commands._checks import FILE, check_task
from kernelskill.commands._common import (
    Ctx,
    checked_precision,
    common_options,
    console,
    emit,
    precision_option,
)


def eval_config(ctx: Ctx, baseline: str, trials: int | None, policy: str | None, timeout: float | None,
                protocol: str | None = None, precision: str | None = None) -> Any:
    """The harness's one settings mapper, with this command's options on top (the loop uses the same)."""
    from kernelskill.pipeline.harness.config import eval_config as harness_eval_config
    from kernelskill.pipeline.harness.isolation import protect

    settings = ctx.settings()
    protect(settings.home)  # its kernelskill.toml holds the key: no worker sees the --home folder
    # one candidate per process: no worker to start ahead for a next one
    return harness_eval_config(settings.harness.model_dump(), protocol=protocol,
                               cache_dir=str(settings.cache_dir / "builds"), baseline=baseline,
                               timing_trials=trials, library_policy=policy, run_timeout_s=timeout,
                               precision=precision, ready_workers=False)


def _ms(value: float | None, iqr: float | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g} ms" + (f" (IQR {iqr:.2g})" if iqr is not None else "")


def _render(data: dict[str, Any]) -> None:
    from rich.panel import Panel
    from rich.table import Table

    con = console()
    r = data["result"]
    d = r.get("details", {})
    ok = r["status"] == "ok"
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("status", f"[{'green' if ok else 'red'}]{r['status']}[/]"
                  + (f" ({d['cheat_check']})" if d.get("cheat_check") else ""))
    table.add_row("message", r.get("message") or "")
    if r.get("precision"):
        table.add_row("precision", r["precision"] + (f" (task dtype {d['task_dtype']})" if d.get("task_dtype") else ""))
    if r.get("speedup") is not None:
        table.add_row("speedup vs eager", f"{r['speedup']:.3f}x")
    table.add_row("candidate", _ms(r.get("candidate_ms"), r.get("candidate_iqr_ms")))
    table.add_row("eager baseline", _ms(r.get("baseline_ms"), r.get("baseline_iqr_ms")))
    if r.get("compile_ms") is not None:
        table.add_row("torch.compile", _ms(r["compile_ms"]) + f"  (candidate {d.get('speedup_vs_compile', 0):.3f}x)")
    errs = d.get("errors") or {}
    if errs:
        table.add_row("max errors", ", ".join(f"{k}={v:.3g}" for k, v in errs.items()))
    sol = d.get("speed_of_light")
    if sol:
        table.add_row("speed of light", f"floor {sol['floor_ms']:.4g} ms ({sol['fraction_of_floor'] * 100:.0f}% of it)")
    took = "cached" if d.get("build_cached") else f"{d.get('build_seconds', 0):.1f} s"
    table.add_row("build", f"key {d.get('build_key', '-')}, {took}")
    if d.get("isolation"):
        table.add_row("isolation", d["isolation"] if d["isolation"] == "namespaces"
                      else f"[yellow]{d.get('isolation_warning') or d['isolation']}[/]")
    who = str(d.get("sandbox_identity") or "")
    if who and not who.startswith("the caller"):  # kernelskill runs as root: who the sandbox's root was
        table.add_row("sandbox user", who if who.startswith("unprivileged") else f"[yellow]{who}[/]")
    con.print(Panel(table, title=f"{Path(r.get('candidate', '')).name} on {Path(r.get('task', '')).name}",
                    expand=False))
    if r.get("build_log"):
        con.print(Panel(r["build_log"][-3000:], title="build log (last 3000 characters)", style="yellow",
                        expand=False))
    prof = data.get("profile")
    if prof:
        if not prof["ok"]:
            con.print(f"[yellow]profile:[/] {prof['message']}")
        else:
            pt = Table(title="ncu: one forward (base units)")
            cols = [("kernel", "Kernel Name"), ("duration ns", "gpu__time_duration.avg"),
                    ("dram %", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
                    ("sm %", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                    ("occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
                    ("regs", "launch__registers_per_thread")]
            for label, _ in cols:
                pt.add_column(label)
            for row in prof["rows"]:
                pt.add_row(*[str(row.get(key, "")) for _, key in cols])
            con.print(pt)


@click.command("eval")
@click.argument("task", type=FILE)
@click.argument("kernel", type=FILE)
@click.option("--profile", "with_profile", is_flag=True, help="Also profile one forward with ncu.")
@click.option("--baseline", type=click.Choice(["eager", "compile"]), default="eager", show_default=True,
              help="Also time torch.compile of the reference (eager is always timed).")
@click.option("--trials", type=click.IntRange(min=1), default=None, help="Timing trials (default from settings).")
@click.option("--policy", type=click.Choice(["forbid", "allow_gemm_conv"]), default=None,
              help="Whether cuBLAS/cuDNN-backed torch ops are allowed for the GEMM/conv part.")
@click.option("--timeout", type=float, default=None, help="Wall-clock limit of the GPU phase, seconds.")
@click.option("--protocol", default=None, metavar="NAME|FILE",
              help="Evaluation protocol: strict, kernelbench or a protocol file (default from settings).")
@precision_option
@common_options
def eval_cmd(ctx: Ctx, task: Path, kernel: Path, with_profile: bool, baseline: str, trials: int | None,
             policy: str | None, timeout: float | None, protocol: str | None, precision: str | None = None) -> None:
    """Evaluate KERNEL (a ModelNew candidate) against TASK (a KernelBench-format task)."""
    data = eval_data(ctx, task, kernel, with_profile=with_profile, baseline=baseline, trials=trials, policy=policy,
                     timeout=timeout, protocol=protocol, precision=precision)
    emit(ctx, data, _render)
    if data["result"]["status"] != "ok":
        sys.exit(1)


def eval_data(ctx: Ctx, task: Path, kernel: Path, *, with_profile: bool = False, baseline: str = "eager",
              trials: int | None = None, policy: str | None = None, timeout: float | None = None,
              protocol: str | None = None, precision: str | None = None) -> dict[str, Any]:
    """The JSON of ``eval`` (the MCP tool calls this too): the task and the candidate are checked before any
    build, then built, checked and timed (and profiled), with the stages shown on stderr. ``precision``
    (fp32 | bf16 | fp16; default the settings') is the dtype the task is evaluated in."""
    precision = checked_precision(precision)  # one line and exit 2 before anything is built
    from kernelskill.commands._progress import Progress
    from kernelskill.errors import KernelskillError
    from kernelskill.pipeline.harness import EvalResult, build, check_candidate, profile, run_candidate
    from kernelskill.pipeline.harness.loader import inspect_task

    check_task(task, other=kernel)
    inspect_task(task)  # the harness's own checks of the task, before any build
    check_candidate(kernel)  # no CUDA / nvcc / usable driver: one line, exit 2, nothing built or cached
    cfg = eval_config(ctx, baseline, trials, policy, timeout, protocol, precision)
    with Progress("eval") as progress:
        # the stages of harness.evaluate, shown one by one: the build, then correctness and timing
        with progress.stage(f"building {kernel.name}"):
            try:
                built = build(kernel, cfg)
            except KernelskillError as exc:  # a candidate that does not parse is a compile error
                built = None
                result = EvalResult(status="compile_error", message=str(exc), task=str(task), candidate=str(kernel),
                                    protocol=cfg.protocol, precision=cfg.precision)
        if built is not None:
            with progress.stage(f"checking and timing {kernel.name} against {task.name} "
                                f"({cfg.correctness_trials} correctness trials, {cfg.timing_trials} timing trials)"):
                result = run_candidate(task, kernel, cfg, built=built)
        data: dict[str, Any] = {"result": result.to_dict()}
        if with_profile and result.status == "ok":
            with progress.stage("profiling one forward with ncu"):
                data["profile"] = profile(task, kernel, cfg).to_dict()
    from kernelskill.pipeline.runs.redact import redact

    return redact(data)  # what the candidate printed or raised may quote a secret: never shown raw
