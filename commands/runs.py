"""``kernelskill runs list | show RUN | report RUN | sql RUN QUERY``: the run store and its analysis."""

from __future__ import annotations

from typing import Any

import click

from kernelskill.commands._common import common_options, console, emit


@click.group("runs")
def runs() -> None:
    """Inspect optimize runs (each is a self-contained folder under <home>/runs)."""


def _store(ctx):
    from kernelskill.pipeline.runs import RunStore

    return RunStore(ctx.settings().runs_dir)


@runs.command("list")
@common_options
def list_cmd(ctx) -> None:
    """All runs, newest last."""
    from kernelskill.pipeline.runs import summary

    rows = [summary(r) for r in _store(ctx).list()]

    def render(items: list[dict[str, Any]]) -> None:
        from rich.table import Table

        table = Table("run", "task", "status", "rounds", "best", "verified", "tokens", "cost")
        for s in items:
            table.add_row(s["id"], s["task"], s["status"], str(s["rounds"]),
                          f"{s['best_speedup']:.3f}x" if s["best_speedup"] else "-",
                          f"{s['verified_speedup']:.3f}x" if s["verified_speedup"] else "-",
                          str(s["tokens"]), f"${s['cost_usd']:.4f}")
        console().print(table if items else "no runs")

    emit(ctx, rows, render)


@runs.command("show")
@click.argument("run")
@common_options
def show(ctx, run: str) -> None:
    """One run: its summary and trajectory."""
    from kernelskill.pipeline.runs import summary

    r = _store(ctx).open(run)
    data = summary(r) | {"trajectory": [e["data"] | {"round": e["round"]} for e in r.log.of_type("attempt")]}

    def render(d: dict[str, Any]) -> None:
        from rich.table import Table

        out = console()
        out.print(f"[bold]{d['id']}[/bold] {d['task']} ({d['status']}), model {d['model']}, "
                  f"{d['llm_calls']} LLM calls, {d['tokens']} tokens, ${d['cost_usd']:.4f}")
        if d.get("waits_for"):
            out.print(f"waits for the {d['waits_for']} step")
        table = Table("round", "branch", "method", "result", "speedup", "accepted")
        for a in d["trajectory"]:
            table.add_row(str(a["round"]), a["branch"], a.get("method") or "-", a["result_class"],
                          f"{a['speedup']:.3f}x" if a.get("speedup") else "-", "yes" if a.get("accepted") else "")
        out.print(table)

    emit(ctx, data, render)


@runs.command("report")
@click.argument("run")
@common_options
def report(ctx, run: str) -> None:
    """The markdown report (trajectory table) of a run."""
    from kernelskill.pipeline.runs import markdown_report

    text = markdown_report(_store(ctx).open(run))
    emit(ctx, {"markdown": text}, lambda d: click.echo(d["markdown"], nl=False))


@runs.command("sql")
@click.argument("run")
@click.argument("query")
@common_options
def sql_cmd(ctx, run: str, query: str) -> None:
    """DuckDB SQL over a run's log: tables ``events``, ``llm_calls``, ``evals``, ``attempts``."""
    from kernelskill.pipeline.runs import sql

    names, rows = sql(_store(ctx).open(run), query)
    data = [dict(zip(names, row, strict=True)) for row in rows]

    def render(items: list[dict[str, Any]]) -> None:
        from rich.table import Table

        table = Table(*names)
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        console().print(table)

    emit(ctx, data, render)
