"""``kernelskill runs list | show | report | sql``: the run store and its analysis; ``pending | answer |
resume | export | import``: split runs (LLM steps answered through files, GPU steps on another machine)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from kernelskill.commands._checks import OUT_FILE
from kernelskill.commands._common import common_options, console, emit, id_column, print_whole


@click.group("runs")
def runs() -> None:
    """Inspect optimize runs (each is a self-contained folder under <home>/runs)."""


def _store(ctx):
    from kernelskill.pipeline.runs import RunStore

    return RunStore(ctx.settings().runs_dir)


def _open(ctx, run: str):
    """A run by folder path, by id under ``<home>/runs``, or by id in a suite under ``<home>/suites``
    (``bench run`` keeps each suite's runs in ``<suite>/runs``)."""
    from pathlib import Path

    from kernelskill.errors import KernelskillError
    from kernelskill.pipeline.runs import MANIFEST, Run, RunStore
    from kernelskill.pipeline.runs.portable import is_run_id

    settings = ctx.settings()
    store = RunStore(settings.runs_dir)
    if any((p / MANIFEST).is_file() for p in (settings.runs_dir / run, Path(run))):
        return store.open(run)  # it is there: any error opening it is that run's own (a log too large, ...)
    try:
        return store.open(run)
    except KernelskillError:
        suites = settings.home / "suites"
        found = sorted(suites.glob(f"*/runs/{run}/{MANIFEST}")) if is_run_id(run) and suites.is_dir() else []
        if len(found) == 1:
            return Run(found[0].parent)
        if found:
            raise KernelskillError(f"run {run}: in {len(found)} suites ("
                                   + ", ".join(str(f.parent) for f in found) + "); give its folder") from None
        raise KernelskillError(f"run {run}: not found under {settings.runs_dir} nor in a suite under {suites} "
                               "(give the run's folder for a suite elsewhere)") from None


@runs.command("list")
@common_options
def list_cmd(ctx) -> None:
    """All runs, newest last."""
    from kernelskill.pipeline.runs import summary

    rows = [summary(r) for r in _store(ctx).list()]

    def render(items: list[dict[str, Any]]) -> None:
        from rich.table import Table

        table = Table()
        id_column(table, "run", [s["id"] for s in items])
        for name in ("task", "precision", "status", "rounds", "best", "verified", "tokens", "cost"):
            table.add_column(name)
        for s in items:
            table.add_row(s["id"], s["task"], s["precision"], s["status"], str(s["rounds"]),
                          f"{s['best_speedup']:.3f}x" if s["best_speedup"] else "-",
                          f"{s['verified_speedup']:.3f}x" if s["verified_speedup"] else "-",
                          str(s["tokens"]), f"${s['cost_usd']:.4f}")
        if items:
            print_whole(table)
        else:
            console().print("no runs")

    emit(ctx, rows, render)


@runs.command("show")
@click.argument("run")
@common_options
def show(ctx, run: str) -> None:
    """One run: its summary and trajectory."""
    from kernelskill.pipeline.runs import summary

    r = _open(ctx, run)
    data = summary(r) | {"trajectory": [e["data"] | {"round": e["round"]} for e in r.log.of_type("attempt")]}

    def render(d: dict[str, Any]) -> None:
        from rich.table import Table

        out = console()
        out.print(f"[bold]{d['id']}[/bold] {d['task']} ({d['status']}), answered by {d['answered_by']}, "
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
@click.option("--html", "html_file", type=OUT_FILE, default=None,
              help="Also write a self-contained HTML page (speedup by round, every candidate's timings).")
@common_options
def report(ctx, run: str, html_file: Path | None) -> None:
    """The markdown report (trajectory table) of a run; with --html FILE also a page to open in a browser."""
    from kernelskill.errors import KernelskillError
    from kernelskill.pipeline.runs import markdown_report
    from kernelskill.pipeline.runs.report import html_report, report_data

    r = _open(ctx, run)
    data: dict[str, Any] = {"markdown": markdown_report(r)}
    if html_file is not None:
        page_data = report_data(r)
        try:
            html_file.parent.mkdir(parents=True, exist_ok=True)
            html_file.write_text(html_report(r, page_data), encoding="utf-8")
        except OSError as exc:
            raise KernelskillError(f"--html {html_file}: cannot write: {exc.strerror or exc}") from exc
        data |= {"html": str(html_file), "candidates": page_data["candidates"],
                 "best_so_far": page_data["best_so_far"]}

    def render(d: dict[str, Any]) -> None:
        if "html" in d:
            click.echo(f"wrote {d['html']} ({len(d['candidates'])} candidates)")
        else:
            click.echo(d["markdown"], nl=False)

    emit(ctx, data, render)


@runs.command("sql")
@click.argument("run")
@click.argument("query")
@common_options
def sql_cmd(ctx, run: str, query: str) -> None:
    """DuckDB SQL over a run's log: tables ``events``, ``llm_calls``, ``evals``, ``attempts``."""
    from kernelskill.pipeline.runs import sql

    names, rows = sql(_open(ctx, run), query)
    data = [dict(zip(names, row, strict=True)) for row in rows]

    def render(items: list[dict[str, Any]]) -> None:
        from rich.table import Table

        table = Table(*names)
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        console().print(table)

    emit(ctx, data, render)


# Split runs: pending, answer, resume, export, import ----------------------------------------------
@runs.command("pending")
@click.argument("run")
@common_options
def pending_cmd(ctx, run: str) -> None:
    """What RUN waits for: LLM steps (role, prompt file) and the GPU step it is paused before."""
    from kernelskill.pipeline.runs import pending_steps

    r = _open(ctx, run)
    rows = pending_steps(r)

    def render(items: list[dict[str, Any]]) -> None:
        from rich.table import Table

        if not items:
            console().print(f"run {r.id} ({r.status()}) waits for nothing")
            return
        table = Table()
        id_column(table, "id", [p["id"] for p in items])
        for name in ("side", "role", "expects", "prompt / candidate"):
            table.add_column(name)
        table.columns[-1].overflow = "fold"
        for p in items:
            table.add_row(p["id"], p["side"], p.get("role") or "-", p.get("expects") or "-",
                          p.get("prompt") or p.get("candidate") or p.get("note") or "-")
        print_whole(table)

    emit(ctx, rows, render)


@runs.command("answer")
@click.argument("run")
@click.argument("request_id")
@click.argument("answer_file", type=click.File("rb"))
@click.option("--by", "by", default="runs answer", show_default=True,
              help="who wrote the answer (a person, an agent's name); the report credits it")
@common_options
def answer_cmd(ctx, run: str, request_id: str, answer_file, by: str) -> None:
    """Answer the LLM step REQUEST_ID of RUN with the text of ANSWER_FILE (`-`: stdin).

    The answer is checked like an API answer of that role; an unusable one is refused with the reason
    and nothing is stored (the run stays paused)."""
    from kernelskill.pipeline.runs.bounds import MAX_ANSWER_FILE_BYTES
    from kernelskill.pipeline.runs.exchange import read_answer_file

    source = getattr(answer_file, "name", "<stdin>")
    # UTF-8 and within the size bound (never read past it), or one line
    text = read_answer_file(answer_file.read(MAX_ANSWER_FILE_BYTES + 1), source)
    data = answer_step(ctx, _open(ctx, run), request_id, text, by=by, source=source)
    emit(ctx, data, lambda d: click.echo(f"stored the {d['role']} answer for {d['request']}; continue with "
                                         f"`{d['next']}`"))


def answer_step(ctx, r, request_id: str, text: str, *, by: str, source: str) -> dict[str, Any]:
    """Store ``text`` as the answer of LLM step ``request_id`` of run ``r`` after checking it like an API
    answer of that role (``source`` names where it came from in the error); the JSON of ``runs answer``."""
    from kernelskill.errors import KernelskillError
    from kernelskill.pipeline.runs import pending_request
    from kernelskill.pipeline.runs.answers import check_answer
    from kernelskill.pipeline.runs.exchange import Answer, Exchange

    exchange = Exchange(r.path)
    waiting = pending_request(r) or {}
    if waiting.get("side") == "gpu" and waiting.get("before") == request_id:
        raise KernelskillError(f"run {r.id}: {request_id} is a GPU step: the GPU side answers it "
                               f"(`python -m kernelskill.pipeline.runs.gpu_side {r.path.parent}`)")
    request = exchange.request(request_id)
    if request.kind != "llm":
        raise KernelskillError(f"run {r.id}: {request_id} is a {request.kind} step (the GPU side answers it)")
    from kernelskill.pipeline.runs.bounds import text_problem

    # a recorded answer outside the bounds (an older version stored it) does not count: the step waits
    recorded = any(e.get("step") == request.id and not text_problem((e.get("data") or {}).get("text", ""))
                   for e in r.log.of_type("llm_call"))
    if exchange.answer_for(request.id) is not None or recorded:
        raise KernelskillError(f"run {r.id}: request {request_id} is already answered")
    reason = check_answer(request.expects, text)
    if reason:
        raise KernelskillError(f"{source}: not a usable {request.role} answer for {request_id}: {reason} "
                               "(nothing stored; the run still waits for it)")
    exchange.put_answer(Answer(id=request.id, text=r.log.scrub(text), answered_by=by.strip() or "runs answer"))
    from kernelskill.commands.optimize import ks

    return {"run": r.id, "request": request.id, "role": request.role, "stored": True,
            "next": ks(ctx, f"runs resume {r.id}")}


@runs.command("resume")
@click.argument("run", required=False)
@click.option("--all", "all_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Advance every run in this folder (their pending GPU steps are evaluated together).")
@click.option("--stop-before", "stop_before", type=click.Choice(["gpu", "llm"]), multiple=True,
              help="Pause before the first step of that side.")
@click.option("--rounds", type=click.IntRange(0, 1000), default=None, help="Change the number of rounds.")
@click.option("--llm", "provider", type=click.Choice(["openai", "replay", "exchange"]), default=None,
              help="LLM provider for the resumed run(s) (default: the one the run was started with).")
@click.option("--model", default=None, help="LLM model name.")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint.")
@click.option("--evaluator", "evaluator_spec", default=None, metavar="MODULE:ATTR",
              help="Evaluator instead of the local harness.")
@click.option("--retriever", "retriever_spec", default=None, metavar="MODULE:ATTR",
              help="Retriever instead of kernelskill.query.")
@click.option("--allow-weak-isolation", is_flag=True, default=False,
              help="Run candidates even where the sandbox has no namespaces (process-only isolation: generated "
                   "code could read this user's files and reach the network).")
@common_options
def resume_cmd(ctx, run: str | None, all_dir: Path | None, stop_before: tuple[str, ...], rounds: int | None,
               provider: str | None, model: str | None, base_url: str | None, evaluator_spec: str | None,
               retriever_spec: str | None, allow_weak_isolation: bool = False) -> None:
    """Continue RUN (or every run in --all DIR) until it finishes or needs the other side."""
    from kernelskill.commands import optimize as opt
    from kernelskill.errors import KernelskillError
    from kernelskill.pipeline.runs import RunStore

    if (run is None) == (all_dir is None):
        raise KernelskillError("runs resume: give one RUN or --all DIR")
    if run is not None:
        opt.report_result(ctx, *resume_one(ctx, run, list(stop_before), rounds, provider, model, base_url,
                                           evaluator_spec, retriever_spec, allow_weak_isolation=allow_weak_isolation))
        return
    settings = ctx.settings(**opt.llm_overrides(model, base_url, provider))
    stops = sorted(set(stop_before))
    assert all_dir is not None
    rows = resume_all(ctx, RunStore(all_dir), settings, stops, rounds, provider, evaluator_spec, retriever_spec,
                      allow_weak_isolation=allow_weak_isolation)

    def render(items: list[dict[str, Any]]) -> None:
        from rich.table import Table

        out = console()
        if not items:
            out.print(f"no runs in {all_dir}")
            return
        table = Table()
        id_column(table, "run", [row["run"] for row in items])
        for name in ("status", "rounds", "best", "waits for / error"):
            table.add_column(name)
        for row in items:
            table.add_row(row["run"], row["status"], str(row.get("rounds") or 0),
                          f"{row['best_speedup']:.3f}x" if row.get("best_speedup") else "-",
                          row.get("waits_for") or row.get("error") or "")
        print_whole(table)
        for row in items:  # what to do next, in full, below the table
            if row.get("waiting"):
                out.print(f"[dim]{row['waiting']}[/dim]", soft_wrap=True)

    emit(ctx, rows, render)
    if any(row["status"] == "error" for row in rows):
        raise SystemExit(2)
    if any(row["status"] == "paused" for row in rows):
        raise SystemExit(3)


def resume_one(ctx, run: str, stop_before: list[str], rounds: int | None = None, provider: str | None = None,
               model: str | None = None, base_url: str | None = None, evaluator_spec: str | None = None,
               retriever_spec: str | None = None, *, display: bool = True,
               allow_weak_isolation: bool = False) -> tuple[Any, Any]:
    """Continue run ``run`` until it finishes or needs the other side (without a visible GPU it stops
    before the GPU steps); returns the run and the loop's result."""
    from kernelskill.commands import optimize as opt

    settings = ctx.settings(**opt.llm_overrides(model, base_url, provider))
    stops = sorted(set(stop_before))
    r = _store(ctx).open(run)
    evaluator = opt.make_evaluator(settings, evaluator_spec, ["gpu"])
    stops, no_gpu = opt.gpu_stops(evaluator, stops)  # this machine is the LLM side: go on up to the GPU step
    if evaluator_spec is None and "gpu" not in stops:  # candidates run here: in a sandbox, or not at all
        from kernelskill.pipeline.harness.preflight import require_isolation

        require_isolation(allow_weak_isolation, home=str(settings.home))
    options = opt.resumed_options(r, settings, stops, rounds, None, provider)
    llm = opt.make_llm(settings, stops)
    retriever = opt.make_retriever(settings, retriever_spec)
    if display:
        opt.say_no_gpu(no_gpu)
    return r, opt.execute(ctx, r, llm, evaluator, retriever, options, settings, display=display)


def resume_all(ctx, store, settings, stops: list[str], rounds: int | None, provider: str | None,
               evaluator_spec: str | None, retriever_spec: str | None, *,
               allow_weak_isolation: bool = False) -> list[dict[str, Any]]:
    """Advance every unfinished run of ``store``: each goes on through its LLM side up to its next GPU
    step, then all pending GPU steps are evaluated together (one batch, builds in parallel), and again,
    until every run has finished or waits for something this machine cannot give."""
    from kernelskill.commands import optimize as opt
    from kernelskill.errors import KernelskillError
    from kernelskill.pipeline.loop import Loop
    from kernelskill.pipeline.runs import gpu_side, pending_request

    log = logging.getLogger(__name__)
    runs = [r for r in store.list() if r.status() != "finished"]
    if not runs:
        return [{"run": r.id, "status": "finished", "rounds": None} for r in store.list()]
    batch_gpu = "gpu" not in stops
    evaluator = opt.make_evaluator(settings, evaluator_spec, ["gpu"])  # checked below
    if batch_gpu:
        try:
            evaluator.check()
        except KernelskillError as exc:
            log.warning("GPU steps stay pending: %s", exc)
            batch_gpu = False
    if batch_gpu and evaluator_spec is None:  # candidates run here: in a sandbox, or not at all
        from kernelskill.pipeline.harness.preflight import require_isolation

        require_isolation(allow_weak_isolation, home=str(settings.home))
    batcher = evaluator if evaluator_spec else gpu_side.HarnessGPU(build_jobs=settings.harness.build_jobs or None)
    loop_stops = sorted(set(stops) | {"gpu"})  # GPU steps wait for the batch
    retriever = opt.make_retriever(settings, retriever_spec)
    own = {r.id: settings.model_copy(deep=True) for r in runs}  # each run keeps its own provider and model
    options = {r.id: opt.resumed_options(r, own[r.id], loop_stops, rounds, None, provider) for r in runs}
    checked: set[tuple[Any, ...]] = set()
    for r in runs:  # every endpoint checked once, before any work
        key = (own[r.id].llm.provider, own[r.id].llm.base_url, own[r.id].llm.model)
        if key not in checked:
            opt.make_llm(own[r.id], stops)
            checked.add(key)
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    from kernelskill.commands._progress import Progress

    with Progress("runs resume --all", enabled=not ctx.json) as progress:
        while True:
            with progress.stage(f"LLM side of {len(runs)} runs, up to their next GPU step"):
                for r in runs:
                    if r.id in errors or r.status() == "finished":
                        continue
                    try:
                        results[r.id] = Loop(r, opt.make_llm(own[r.id], [], check=False), evaluator, retriever,
                                             options[r.id], gpu=opt.run_gpu(r, settings)).execute()
                    except KernelskillError as exc:
                        errors[r.id] = str(exc)
            if not batch_gpu:
                break
            with progress.stage("the pending GPU steps, as one batch"):
                done = gpu_side.evaluate_pending([r for r in runs if r.id not in errors], batcher,
                                                 progress=progress)
            if not any(not str(row["status"]).startswith(("error", "skipped")) for row in done):
                break
    rows = []
    for r in runs:
        res = results.get(r.id)
        row: dict[str, Any] = {"run": r.id, "status": "error" if r.id in errors else (res.status if res else r.status()),
                               "rounds": res.rounds_done if res else None,
                               "best_speedup": (res.best or {}).get("speedup") if res else None}
        if r.id in errors:
            row["error"] = errors[r.id]
        elif res is not None and res.status == "paused":
            waiting = pending_request(r)
            row["waits_for"] = f"{waiting['side']} step {waiting['before']}" if waiting else None
            row["waiting"] = opt.waiting_message(ctx, r)
        rows.append(row)
    return rows


@runs.command("export")
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN...")
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Archive file for one RUN, or a folder (an existing one, or ending in /) for one archive per "
                   "run (default ./<run>.kernelskill-run.tar.gz).")
@common_options
def export_cmd(ctx, run_ids: tuple[str, ...], output: str | None) -> None:
    """Pack each RUN into one archive for another machine (refused if its folder is not portable)."""
    from kernelskill.errors import KernelskillError
    from kernelskill.pipeline.runs.portable import ARCHIVE_SUFFIX, export_run

    store = _store(ctx)
    runs_ = [store.open(r) for r in run_ids]  # every run found before anything is written
    folder = output is None or output.endswith("/") or Path(output).is_dir()
    if len(runs_) > 1 and not folder:
        raise KernelskillError(f"-o {output}: several runs need a folder (end it with /)")
    rows = []
    for r in runs_:
        target = Path(output or ".") / f"{r.id}{ARCHIVE_SUFFIX}" if folder else Path(output or ".")
        rows.append({"run": r.id, "archive": str(export_run(r.path, target))})
    emit(ctx, rows, lambda items: [click.echo(f"exported {d['run']} to {d['archive']}") for d in items])


@runs.command("import")
@click.argument("archives", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False),
                metavar="ARCHIVE...")
@click.option("--into", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Runs folder to import into (default: this home's runs folder).")
@click.option("--replace", is_flag=True, default=False,
              help="Take back a run that exists here (only when the archive's log extends the local one).")
@common_options
def import_cmd(ctx, archives: tuple[Path, ...], into: Path | None, replace: bool) -> None:
    """Unpack run archives (from `runs export` or gpu_side --export-to) into the runs folder; all or nothing."""
    from kernelskill.pipeline.runs import Run
    from kernelskill.pipeline.runs.portable import import_archives

    # all or nothing: one refused archive imports none of them
    dests = import_archives(list(archives), into or ctx.settings().runs_dir, replace=replace, require=("run.json",))
    rows = [{"run": dest.name, "path": str(dest), "status": Run(dest).status()} for dest in dests]
    emit(ctx, rows, lambda items: [click.echo(f"imported {d['run']} ({d['status']}) into {d['path']}")
                                   for d in items])
