"""``kernelskill query KERNEL``: which methods apply to this kernel, and why?"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kernelskill.commands import _common
from kernelskill.commands._checks import FILE, check_context, check_task
from kernelskill.commands._common import (
    checked_precision,
    common_options,
    console,
    emit,
    precision_option,
    shorten,
)
from kernelskill.errors import KernelskillError
from kernelskill.protocols import load_protocol


def _parse_context(items: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise KernelskillError(f"--context {item!r}: expected KEY=VALUE (e.g. tolerance_atol=1e-4)")
        value: Any = raw.strip()
        low = value.lower()
        if low in ("true", "false"):
            value = low == "true"
        else:
            for cast in (int, float):
                try:
                    value = cast(value)
                    break
                except ValueError:
                    continue
        out[key.strip()] = value
    return out


def _live_profile(task: Path | None, kernel: Path, settings: Any) -> Any:
    if task is None:
        raise KernelskillError("--ncu needs --task (ncu profiles one forward of the task with this kernel)")
    from kernelskill.pipeline.harness import profile as harness_profile
    from kernelskill.pipeline.harness.config import eval_config
    from kernelskill.retrieval.profile import capture_metrics, parse_csv_text

    # the same settings path as eval and optimize: protocol, timeouts and the shared build cache
    config = eval_config(settings.harness.model_dump(), cache_dir=str(settings.cache_dir / "builds"),
                         ready_workers=False)
    result = harness_profile(task, kernel, config, metrics=tuple(capture_metrics()))
    if not result.ok:
        raise KernelskillError(f"{kernel}: profiling failed: {result.message}")
    return parse_csv_text(result.csv, source=f"ncu ({kernel.name})")


@click.command("query")
@click.argument("kernel", type=FILE)
@click.option("--task", type=FILE, default=None,
              help="The KernelBench task the kernel implements (op summary, dtype).")
@click.option("--profile", "profile_path", type=FILE, default=None,
              help="ncu profile: CSV (--csv --page raw, base or human units) or .ncu-rep.")
@click.option("--ncu", "run_ncu", is_flag=True, default=False,
              help="Profile now with the harness (needs a CUDA GPU, ncu and --task).")
@click.option("--explain", is_flag=True, default=False,
              help="Show the full trace: every derived field, predicate, case and veto evaluated.")
@click.option("--context", "context_items", multiple=True, metavar="KEY=VALUE",
              help="Set a context field, e.g. --context tolerance_atol=1e-4 --context task_dtype=bf16.")
@click.option("-k", "k", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Skill docs to attach per permitted method.")
@click.option("--protocol", default=None, metavar="NAME|FILE",
              help="Ask as a run evaluated under this protocol (strict, kernelbench or a protocol file): its "
                   "tolerances and library policy decide the vetoes, as in the optimize loop.")
@click.option("--why", "why", default=None, metavar="METHOD",
              help="Also say why METHOD is or is not in the answer, one line per reason with the values.")
@precision_option
@common_options
def query(ctx, kernel: Path, task: Path | None, profile_path: Path | None, run_ncu: bool, explain: bool,
          context_items: tuple[str, ...], k: int, protocol: str | None, why: str | None,
          precision: str | None = None) -> None:
    """Which methods apply to KERNEL, and why (offline; no GPU, no LLM)."""
    precision = checked_precision(precision)  # a run in bf16/fp16: task_dtype and the precision vetoes follow it
    if profile_path is not None and run_ncu:
        raise KernelskillError("give either --profile or --ncu, not both")
    if protocol is not None:
        load_protocol(protocol)  # an unknown name or a bad file: one line, before any work
    prof: Any = profile_path
    if run_ncu:
        if task is not None:
            check_task(task, option="--task")
        prof = _live_profile(task, kernel, ctx.settings())
    result = query_result(ctx, kernel, task=task, profile=prof, context=_parse_context(context_items), k=k,
                          protocol=protocol, why=why, precision=precision)
    if ctx.json and not explain:  # the trace is a large part of the answer: --explain asks for it
        emit(ctx, result.model_dump(mode="json", exclude={"trace"}))
    else:
        emit(ctx, result, lambda r: (render(r, explain=explain), render_why(r.method_why)))


def query_result(ctx, kernel: Path, *, task: Path | None, profile: Any, context: dict[str, Any], k: int,
                 protocol: str | None = None, why: str | None = None, precision: str | None = None) -> Any:
    """The QueryResult ``query`` shows (the MCP tool calls this too): the task and the context fields are
    checked first; a missing KB is built once, with a note and progress on stderr. ``protocol`` sets the
    settings the optimize loop's query gets for a run under it (:meth:`Settings.under_protocol`), ``precision``
    the dtype the run evaluates in (:meth:`Settings.under_precision`). With ``why`` (a method id) its
    ``method_why`` says why that method is or is not in the answer."""
    result = _query_result(ctx, kernel, task=task, profile=profile, context=context, k=k, protocol=protocol,
                           precision=precision)
    if why:
        from kernelskill.retrieval.api import why_method

        result.method_why = why_method(result, why, settings=ctx.settings().under_protocol(protocol)
                                       .under_precision(precision))
    return result


def _query_result(ctx, kernel: Path, *, task: Path | None, profile: Any, context: dict[str, Any], k: int,
                  protocol: str | None = None, precision: str | None = None) -> Any:
    from kernelskill.kb.sources import CURRENT
    from kernelskill.retrieval.api import query as run_query

    if task is not None:
        check_task(task, option="--task")
    settings = ctx.settings().under_protocol(protocol).under_precision(precision)
    if (settings.kb_dir / CURRENT).is_file():
        if context:
            context = check_context(context, _kb_fields(settings))
        return run_query(kernel, task=task, profile=profile, settings=settings, context=context or None, k=k)
    click.echo(f"no knowledge base in {settings.kb_dir} yet: this query builds it from the bundled skills "
               f"(once; embedding the skill docs takes a while on a small CPU)", err=True)
    from kernelskill.commands._progress import Progress

    with Progress("query") as progress, progress.stage("building the knowledge base"):
        result = run_query(kernel, task=task, profile=profile, settings=settings, context=context or None, k=k)
    if context:  # the KB exists now: its fields say which context keys are valid
        check_context(context, _kb_fields(settings))
    return result


def _kb_fields(settings: Any) -> list[Any]:
    from kernelskill.kb.store import KBStore  # DuckDB: only a query with --context reads the fields here

    return KBStore.open(settings.kb_dir, read_only=True).fields()


# ------------------------------------------------------------------------------------------ render
def _v(value: Any) -> str:
    if value is None:
        return "[yellow]unknown[/]"
    if value is True:
        return "[green]true[/]"
    if value is False:
        return "[red]false[/]"
    if isinstance(value, float):
        return f"{value:.4g}"
    from rich.markup import escape

    return escape(str(value))


def _inputs(inputs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_v(v)}" for k, v in inputs.items())


def render(r: Any, *, explain: bool = False) -> None:
    from rich.markup import escape as e  # KB and user text is shown as written: "[ty][tx]" is not markup
    from rich.panel import Panel
    from rich.table import Table

    con = console()
    head = f"[bold]{e(str(r.kernel))}[/]"
    if r.task:
        head += f"  task {e(str(r.task))}"
    if r.profile:
        head += f"\nprofile {e(str(r.profile.source))} ({r.profile.units} units)"
    else:
        head += "\n[yellow]static-only[/]: no profile; decided from code features and similarity"
    con.print(Panel(head, title="kernelskill query", expand=False))

    feats = ", ".join(f"{k}={v}" if not isinstance(v, bool) else k
                      for k, v in r.features.values.items() if v is not False)
    con.print(f"[bold]features[/] ({r.features.source}): {feats or 'none set'}")
    if r.features.kernels:
        con.print(f"[bold]kernels in source[/]: {', '.join(r.features.kernels)}")

    if r.profile:
        p = r.profile
        t = Table(title=f"profile: {p.launches_per_forward} launches per forward, dominant {p.dominant}",
                  title_justify="left")
        for col in ("kernel", "launches", "time (us)", "share", "vendor", "in source"):
            t.add_column(col, justify="right" if col in ("launches", "time (us)", "share") else "left",
                         overflow="fold")
        for kern in p.kernels:
            t.add_row(e(kern.base_name), str(kern.launches),
                      f"{(kern.total_duration_ns or 0) / 1000:.1f}",
                      f"{kern.share_pct:.1f}%" if kern.share_pct is not None else "-",
                      "yes" if kern.vendor else "", "yes" if kern.in_source else "")
        con.print(t)
        keys = ("dram_throughput_pct", "l2_throughput_pct", "l1_throughput_pct", "sm_throughput_pct",
                "achieved_occupancy_pct", "registers_per_thread", "stall_long_scoreboard_ratio",
                "branch_divergence_pct", "kernel_duration_ns")
        derived = {s.id: s.value for s in r.trace if s.kind == "derived"}
        vals = {**p.fields, **derived}
        con.print("  " + "  ".join(f"{key}={_v(vals.get(key))}" for key in keys if key in vals))
        if p.missing and explain:
            con.print(f"  [yellow]missing[/]: {e('; '.join(p.missing))}")
        elif p.missing:  # names only: an older capture lacks several newer counters, each a long line of columns
            names = [m.split(" (looked for", 1)[0] for m in p.missing]
            con.print(f"  [yellow]missing[/] ({len(names)}; no rule decides on them; --explain lists the "
                      f"ncu columns looked for): {e(', '.join(names))}")

    if getattr(r, "kernels", None):
        t = Table(title="kernels: share of time, operation, own tier and bottleneck (* = methods chosen for it)",
                  title_justify="left")
        for col in ("kernel", "share", "op", "tier", "bottleneck", "metrics that decided"):
            t.add_column(col, overflow="fold")
        for kd in r.kernels:
            t.add_row(e(kd.name) + (" *" if kd.target else "") + (" (vendor)" if kd.vendor else ""),
                      f"{kd.share_pct:.1f}%" if kd.share_pct is not None else "-", kd.op, kd.tier,
                      kd.bottleneck or "-", ", ".join(f"{m}={_v(v)}" for m, v in kd.metrics.items()))
        con.print(t)

    tier_col = "yellow" if r.tier.name == "unknown" else "cyan"
    con.print(f"[bold]tier[/] [{tier_col}]{r.tier.name}[/]: {e(r.tier.reason)}")
    b = r.bottleneck
    con.print(f"[bold]bottleneck[/] [cyan]{b.id or 'none'}[/]: {e(b.reason)}")
    cands = [c for c in b.candidates if c.considered]
    if cands:
        con.print("  candidates: " + "; ".join(
            f"{c.id} (priority {c.priority}{', forced by ' + ','.join(c.forced_by) if c.forced_by else ''}"
            f"{': ' + c.outcome if c.outcome else ''})" for c in cands))
    c = r.case
    if c.id:
        con.print(Panel(f"[bold]{e(c.title)}[/]\n{e(c.rationale)}\n[dim]{e(c.reason)}[/]",
                        title=f"case {c.id}" + (" (fallback)" if c.fallback else ""), expand=False))
    else:
        con.print(f"[red]no case matched[/]: {e(c.reason)}")

    _render_routes(con, r)
    if r.permitted:
        whole = not _common.stdout_is_terminal()  # a pipe or a file gets every guidance whole; a terminal a summary
        t = Table(title="permitted methods (try in this order)" + (
            "" if whole else "; guidance summarised here, whole in a pipe or with --json"), title_justify="left")
        for col in ("#", "method", "guidance", "worked example"):
            t.add_column(col, overflow="fold")  # a path that does not fit wraps: it is never cut
        for m in r.permitted:
            ex = next((e for e in m.examples if e.endswith("after.py")), m.examples[0] if m.examples else "")
            guide = " ".join((m.guidance or (m.docs[0].text if m.docs else "")).split())
            t.add_row(str(m.rank), f"{m.id}\n[dim]{e(m.name)}[/]", e(guide if whole else shorten(guide, 240)),
                      _short(ex) + (f"\n[dim]{m.measured.summary()}[/]" if m.measured else ""))
        con.print(t)
    if r.forbidden:
        t = Table(title="forbidden", title_justify="left")
        for col in ("method", "by", "reason"):
            t.add_column(col, overflow="fold")
        for f in r.forbidden:
            t.add_row(f.id, f.veto or f.by, e(f.reason))
        con.print(t)
    for note in r.notes:
        con.print(f"[dim]note: {e(note)}[/]")

    steps = r.trace if explain else r.why()
    t = Table(title="trace" if explain else "why (use --explain for the full trace)", title_justify="left")
    for col in ("kind", "id", "expression", "inputs", "value"):
        t.add_column(col, overflow="fold")
    for s in steps:
        t.add_row(s.kind, s.id, e(s.expr or ""), _inputs(s.inputs),
                  _v(s.value) + (f" [dim]{e(s.note)}[/]" if s.note else ""))
    con.print(t)


def _render_routes(con: Any, r: Any) -> None:
    """The strategic routes of the operation that holds the time (each with its ceiling and whether the protocol
    allows it), where the kernel stands, and the methods it already applies."""
    from rich.markup import escape as e
    from rich.table import Table

    rr = getattr(r, "routes", None)
    if rr is not None and rr.routes:
        t = Table(title=f"routes for {rr.op}" + (f" ({rr.kernel})" if rr.kernel else "")
                  + f": speed-of-light ceilings on {rr.device}" + (f"; work: {rr.work}" if rr.work else ""),
                  title_justify="left")
        for col in ("route", "allowed", "ceiling", "computes at", "methods"):
            t.add_column(col, overflow="fold")
        for c in rr.routes:
            ceiling = "-" if c.ceiling_ms is None else f"{c.ceiling_ms:.4g} ms"
            if c.current and c.pct_of_ceiling is not None:
                ceiling += f" (now at {c.pct_of_ceiling:.0f} %)"
            t.add_row(c.route + (" [bold](current)[/]" if c.current else ""),
                      "[green]yes[/]" if c.allowed else f"[red]no[/] [dim]{e(c.why_not)}[/]", ceiling, e(c.rate),
                      ", ".join(c.methods))
        con.print(t)
        if rr.verdict:
            style = "bold yellow" if rr.at_roofline else "dim"
            con.print(f"[{style}]{'at its roofline: ' if rr.at_roofline else ''}{e(rr.verdict)}[/]")
    applied = getattr(r, "applied", None) or []
    if applied:
        con.print("already applied (not offered again): " + ", ".join(
            f"{a.id}" + (f" [dim](line {a.line})[/]" if a.line else "") for a in applied))


def render_why(w: Any) -> None:
    """``--why METHOD``: one line per reason."""
    if w is None:
        return
    from rich.markup import escape as e

    con = console()
    state = "[green]in the answer[/]" if w.in_answer else "[yellow]not in the answer[/]"
    con.print(f"[bold]why {e(w.method)}[/]: {state} ({w.status})")
    for r in w.reasons:
        con.print(f"  - {e(r.text)}")


def _short(path: str) -> str:
    if not path:
        return ""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        parts = Path(path).parts
        return str(Path(*parts[-4:])) if len(parts) > 4 else path
