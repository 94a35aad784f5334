"""``kernelskill kb ...``: build, curate, inspect and repair the knowledge base."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from kernelskill.commands._checks import check_choice
from kernelskill.commands._common import common_options, console, emit, stdout_is_terminal
from kernelskill.errors import printable

TYPES = ["field", "predicate", "tier", "bottleneck", "case", "veto", "method", "doc"]


@click.group("kb")
def kb() -> None:
    """Curate and inspect the knowledge base (DuckDB + Chroma under <home>/kb)."""


def _open(ctx: Any, *, read_only: bool = False, bundled: Path | None = None):
    from kernelskill.kb.home import open_store
    from kernelskill.kb.store import KBStore

    settings = ctx.settings()
    if bundled is not None:  # the caller builds the KB itself from this base folder
        return KBStore.open(settings.kb_dir, embed_settings=settings.embed)
    return open_store(settings, read_only=read_only)


def _safe(text: Any) -> str:
    """A value for a rich line or cell: control characters escaped (:func:`printable`), markup not read."""
    from rich.markup import escape

    return escape(printable("" if text is None else text))


def _where(file: str, line: int) -> str:
    try:
        file = str(Path(file).resolve().relative_to(Path.cwd()))
    except ValueError:
        pass
    return f"{file}:{line}"


def _ingest_render(title: str):
    def render(r: dict[str, Any]) -> None:
        built = r.get("built")
        if built is not None:
            console().print(f"{title}: first use of this home: KB built from its base skills "
                            f"({built['content_hash'][:12]}, {built['encoded']} docs embedded) in "
                            f"{built['seconds']:.1f} s", markup=False)
        if built is not None and not r["changed"]:
            state = "added nothing new (every object was already in the KB just built)"
        else:
            state = "KB updated" if r["changed"] else "KB unchanged"
        counts = ", ".join(f"{n} {k}" for k, n in r["counts"].items() if n)
        new = r.get("new_objects")
        gained = f"; {new:+d} objects" if new else ""
        console().print(f"{title}: {state} ({r['content_hash'][:12]}) - {counts}{gained}; "
                        f"{r['upserted']} docs upserted, {r['deleted']} deleted, {r['encoded']} encoded, "
                        f"{r['seconds']:.1f} s (ingest {r.get('ingest_seconds', r['seconds']):.2f} s)",
                        markup=False)
    return render


def _ingest(name: str, stage: str, work: Any, *, settings: Any = None, bundled: Path | None = None
            ) -> dict[str, Any]:
    """Run an ingest with a progress display; ``seconds`` in the report is the whole command's wall time
    (reading, validating and linting the skills included, and the first build of a new home's KB when
    ``settings`` is given and it has none: reported as ``built``), ``ingest_seconds`` the store's part."""
    from kernelskill.commands._progress import Progress
    from kernelskill.kb.curate import init_kb
    from kernelskill.kb.store import KBStore

    built = None
    before = None
    with Progress(f"kb {name}") as progress:
        if settings is not None:
            store = KBStore.open(settings.kb_dir, embed_settings=settings.embed)
            if not store.exists():
                with progress.stage("first use of this home: building the KB from its base skills "
                                    "(embedding every doc with MiniLM)"):
                    built = init_kb(settings, store=store, bundled=bundled).model_dump()
            before = sum(store.counts().values()) if store.exists() else 0
        with progress.stage(stage):
            report = work()
        wall = progress.elapsed
    done = report if isinstance(report, dict) else report.model_dump()
    data = done | {"ingest_seconds": done["seconds"], "seconds": round(wall, 3), "built": built}
    if before is not None:
        data["new_objects"] = sum(done["counts"].values()) - before
    return data


_SKILLS_OPT = click.option(
    "--skills", "skills_dir", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
    help="Base skills folder instead of the bundled kb/skills/ (init records it for later add/import).")


@kb.command("init")
@_SKILLS_OPT
@common_options
def init_cmd(ctx, skills_dir: Path | None) -> None:
    """Build the KB from the bundled skills plus the user's skills (idempotent)."""
    from kernelskill.kb.curate import init_kb
    from kernelskill.kb.store import KBStore

    settings = ctx.settings()
    store = KBStore.open(settings.kb_dir, embed_settings=settings.embed)
    data = _ingest("init", "reading, linting and indexing the skills (embedding new docs with MiniLM)",
                   lambda: init_kb(settings, store=store, bundled=skills_dir))
    emit(ctx, data, _ingest_render("init"))


@kb.command("add")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@_SKILLS_OPT
@common_options
def add_cmd(ctx, files: tuple[Path, ...], skills_dir: Path | None) -> None:
    """Validate, lint and ingest FILE...; keep them under the home so they survive a re-init."""
    from kernelskill.kb.curate import add_files

    settings = ctx.settings()
    data = _ingest("add", f"validating, linting and ingesting {len(files)} file(s)",
                   lambda: add_files(settings, list(files), bundled=skills_dir), settings=settings,
                   bundled=skills_dir)
    emit(ctx, data, _ingest_render("add"))


@kb.command("import")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@_SKILLS_OPT
@common_options
def import_cmd(ctx, folder: Path, skills_dir: Path | None) -> None:
    """Merge a skills folder (e.g. from 'kb export') into the KB."""
    from kernelskill.kb.curate import import_dir
    from kernelskill.kb.learned import LearnedStore

    settings = ctx.settings()
    data = _ingest("import", f"reading, linting and ingesting {folder}",
                   lambda: import_dir(settings, folder, bundled=skills_dir), settings=settings, bundled=skills_dir)
    # the learned records of an export come back too (already present: skipped)
    data["learned_added"] = len(LearnedStore(settings.kb_dir, embed_settings=settings.embed).import_(folder))
    emit(ctx, data, _ingest_render("import"))


@kb.command("export")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@common_options
def export_cmd(ctx, folder: Path) -> None:
    """Write the KB as YAML (+ worked examples) that imports back to the same content hash."""
    from kernelskill.kb.curate import export_kb
    from kernelskill.kb.learned import LearnedStore

    result = export_kb(_open(ctx, read_only=True), folder)
    settings = ctx.settings()
    result["learned"] = LearnedStore(settings.kb_dir, embed_settings=settings.embed).export(folder)
    emit(ctx, result, lambda r: console().print(
        f"exported {len(r['files'])} files, {r['examples']} example files and {r['learned']} learned records "
        f"to {r['folder']} (content hash {r['content_hash'][:12]})"))


@kb.command("list")
@click.option("--type", "type_", type=click.Choice(TYPES), default=None, help="Only objects of this type.")
@click.option("--bottleneck", default=None, help="Only objects tied to this bottleneck id.")
@common_options
def list_cmd(ctx, type_: str | None, bottleneck: str | None) -> None:
    """List KB objects."""
    store = _open(ctx, read_only=True)
    check_choice("--bottleneck", bottleneck, [b.id for b in store.bottlenecks()])
    rows = store.list_objects(type_, bottleneck)

    def render(items: list[dict[str, Any]]) -> None:
        from rich.table import Table

        table = Table("type", "id", "title", "source", title=f"{len(items)} objects")
        for r in items:
            table.add_row(_safe(r["type"]), _safe(r["id"]), _safe(r["title"] or ""), _safe(r["location"]))
        console().print(table)

    emit(ctx, rows, render)


def show_data(store: Any, obj_id: str) -> dict[str, Any]:
    """One KB object as the JSON of ``kb show``: its type, where it is defined, and its fields."""
    from kernelskill.errors import KernelskillError

    obj = store.get(obj_id)
    if obj is None:
        raise KernelskillError(f"no KB object with id {obj_id!r} (see 'kernelskill kb list')")
    return {"type": type(obj).__name__.lower(), "source": store.location(obj_id), **obj.model_dump(mode="json")}


@kb.command("show")
@click.argument("obj_id", metavar="ID")
@common_options
def show_cmd(ctx, obj_id: str) -> None:
    """Show one object as YAML."""
    data = show_data(_open(ctx, read_only=True), obj_id)

    def render(d: dict[str, Any]) -> None:
        import yaml
        from rich.syntax import Syntax

        console().print(f"[bold]{_safe(d['type'])}[/bold] {_safe(obj_id)}  ({_safe(d['source'])})")
        body = {k: v for k, v in d.items() if k not in ("type", "source")}
        text = yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=10_000)
        if stdout_is_terminal():
            console().print(Syntax(text, "yaml", word_wrap=True))
        else:  # plain, whole lines for a pipe or a file
            click.echo(text, nl=False)

    emit(ctx, data, render)


@kb.command("search")
@click.argument("text")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=5, show_default=True, help="Number of hits.")
@click.option("--method", "methods", multiple=True, help="Only docs of these methods (repeatable).")
@click.option("--bottleneck", default=None, help="Only docs tagged with this bottleneck (or untagged).")
@common_options
def search_cmd(ctx, text: str, k: int, methods: tuple[str, ...], bottleneck: str | None) -> None:
    """Vector search over the skill docs."""
    from kernelskill.errors import KernelskillError

    if not text.strip():
        raise KernelskillError("kb search: the search text is empty (e.g. kernelskill kb search \"strided writes\")")
    store = _open(ctx)
    check_choice("--bottleneck", bottleneck, [b.id for b in store.bottlenecks()])
    known = [m.id for m in store.methods()]
    for method in methods:
        check_choice("--method", method, known)
    hits = store.search_docs(text, k=k, methods=list(methods) or None, bottleneck=bottleneck)

    def render(items: list[Any]) -> None:
        from rich.table import Table

        table = Table("rank", "distance", "doc", "method", "title")
        for i, h in enumerate(items, 1):
            table.add_row(str(i), f"{h.distance:.3f}", _safe(h.id), _safe(h.method), _safe(h.title))
        console().print(table if items else "no hits")

    emit(ctx, hits, render)


def _lint_report(ctx):
    from kernelskill.kb.curate import lint_sources

    return lint_sources(ctx.settings())


@kb.command("lint")
@click.option("--strict", is_flag=True, help="Exit non-zero on warnings too.")
@common_options
def lint_cmd(ctx, strict: bool) -> None:
    """Lint the KB's sources (bundled + user skills): errors, warnings, coverage holes."""
    report = _lint_report(ctx)
    data = {"ok": report.ok, "errors": len(report.errors), "warnings": len(report.warnings),
            "findings": [f.model_dump() for f in report.findings]}

    def render(d: dict[str, Any]) -> None:
        from rich.table import Table

        table = Table("severity", "where", "code", "message")
        for f in d["findings"]:
            style = "red" if f["severity"] == "error" else "yellow"
            table.add_row(f"[{style}]{f['severity']}[/{style}]", _safe(_where(f["file"], f["line"])), _safe(f["code"]),
                          _safe(f["message"]))
        if d["findings"]:
            console().print(table)
        console().print(f"{d['errors']} errors, {d['warnings']} warnings")

    emit(ctx, data, render)
    if report.errors or (strict and report.warnings):
        sys.exit(1)


@kb.command("coverage")
@common_options
def coverage_cmd(ctx) -> None:
    """Cases per bottleneck x tier x structure (0 = a hole: only the fallback applies), and per protocol
    scenario the fewest methods a case that can be chosen keeps after the vetoes (below 2 = a dead end)."""
    report = _lint_report(ctx)
    data = {"structures": report.structures, "holes": report.holes(),
            "rows": [r.model_dump() for r in report.coverage],
            "dead_ends": report.dead_ends(), "protocols": report.protocol_summary()}

    def render(d: dict[str, Any]) -> None:
        from rich.table import Table

        table = Table("bottleneck", "tier", *[f"s{s}" for s in d["structures"]], title="cases per cell")
        for r in d["rows"]:
            cells = [str(r["counts"][s]) if r["counts"][s] else "[red]0[/red]" for s in d["structures"]]
            table.add_row(r["bottleneck"], r["tier"], *cells)
        console().print(table)
        console().print(f"{d['holes']} holes")
        proto = Table("protocol", "dtype", "arch", "forward", "cells", "fewest methods", "dead ends",
                      title="permitted methods after vetoes, per protocol scenario")
        for r in d["protocols"]:
            low = r["min_permitted"]
            low_txt = "-" if low is None else (f"[red]{low}[/red]" if low < 2 else str(low))
            dead = f"[red]{r['dead_ends']}[/red]" if r["dead_ends"] else "0"
            proto.add_row(r["protocol"], r["dtype"], f"sm_{r['arch_sm']}", r["forward"], str(r["cells"]), low_txt, dead)
        console().print(proto)
        console().print(f"{d['dead_ends']} dead ends")

    emit(ctx, data, render)


@kb.command("stats")
@common_options
def stats_cmd(ctx) -> None:
    """Counts, content hash, schema version and sync state."""
    from kernelskill.kb.learned import LearnedStore

    stats = _open(ctx, read_only=True).stats()
    settings = ctx.settings()
    stats["learned"] = LearnedStore(settings.kb_dir, embed_settings=settings.embed).stats()

    def render(s: dict[str, Any]) -> None:
        from rich.table import Table

        table = Table("key", "value", title=f"KB {s['kb_dir']}")
        for k, n in s["counts"].items():
            table.add_row(k, str(n))
        b = s["backing"]
        table.add_row("methods with a worked example", f"{b['with_example']} of {b['methods']}")
        table.add_row("methods with measured evidence", f"{b['measured']} of {b['methods']} (pays {b['pays']}, "
                      f"no gain {b['no_gain']}, slower {b['slower']})")
        learned = s["learned"]
        table.add_row("learned records (kb learn)", f"{learned['records']} from {learned['runs']} runs")
        table.add_row("content hash", str(s["content_hash"]))
        table.add_row("schema version", str(s["schema_version"]))
        table.add_row("ingested at", str(s["ingested_at"]))
        table.add_row("embedding model", str(s["embed_model"]))
        table.add_row("chroma docs", str(s["chroma"]["docs"]))
        table.add_row("chroma in sync", "yes" if s["chroma"]["in_sync"] else "[red]no[/red]")
        console().print(table)

    emit(ctx, stats, render)


@kb.command("learn")
@click.argument("runs", nargs=-1, required=True)
@click.option("--hardware", default=None,
              help="The GPU's name for runs recorded before the harness noted it (e.g. 'NVIDIA H200').")
@click.option("--dry-run", is_flag=True, help="Show what would be learned; write nothing.")
@common_options
def learn_cmd(ctx, runs: tuple[str, ...], hardware: str | None, dry_run: bool) -> None:
    """Turn each verified improvement of RUN... (a run folder or id) into learned evidence, and write
    reviewable proposals to <home>/proposals/<run>.yaml (never merged by themselves). A method that is not a
    KB id is mapped to the KB method it is (guidance and code similarity, with the score) or drafted there as
    a new method that 'kb add' accepts as it is (worked example: the run's parent and child)."""
    from kernelskill.pipeline.loop.learning import learn_runs

    results = learn_runs(ctx.settings(), list(runs), hardware=hardware, dry_run=dry_run)
    data = {"dry_run": dry_run, "learned": sum(len(r.records) for r in results),
            "added": sum(len(r.added) for r in results),
            "runs": [r.model_dump(exclude={"records"}) | {"records": [x.model_dump(exclude={"before_source",
                                                                                          "after_source"})
                                                                    for x in r.records]} for r in results]}

    def render(d: dict[str, Any]) -> None:
        for r in d["runs"]:
            if not r["records"]:
                console().print(printable(f"run {r['run_id']}: nothing to learn (no verified improvement)"),
                                markup=False)
            for rec in r["records"]:
                state = "added" if rec["id"] in r["added"] else ("would add" if d["dry_run"] else "already learned")
                console().print(printable(f"run {r['run_id']} {rec['step']}: {rec['method']} {rec['speedup']:.2f}x "
                                          f"over its parent, {state}"), markup=False)
            for m in r["mappings"]:
                best = m["best"] or {}
                score = (f"score {best['score']:.3f} (guidance {best['guidance']:.3f}, code {best['code']:.3f}, name "
                         f"{best['name']:.3f}; threshold {m['threshold']})" if best else "no KB method to compare")
                what = (f"is the KB method {m['maps_to']}" if m["maps_to"] else
                        f"is new: drafted as {m['draft']} (nearest {best.get('method', '-')})")
                console().print(printable(f"  {m['step']} {m['run_method']} {what}: {score}"), markup=False)
            for why in r["skipped"]:
                console().print(f"  not an improvement: {printable(why)}", markup=False)
            if r["proposals"]:
                console().print(f"  proposals to review: {r['proposals']}", markup=False)
        console().print(f"{d['added']} learned records added ({d['learned']} found)")

    emit(ctx, data, render)


@kb.command("remove")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@common_options
def remove_cmd(ctx, ids: tuple[str, ...]) -> None:
    """Remove objects and their entries in the skill files under <home>/skills, as one unit: a case left
    naming a removed method is refused (nothing changes); bundled objects are refused (to change one, add a
    file defining the same id with a higher version)."""
    from kernelskill.kb.curate import remove_objects

    settings = ctx.settings()
    data = _ingest("remove", f"removing {len(ids)} object(s), relinting and ingesting",
                   lambda: remove_objects(settings, list(ids)))

    def render(r: dict[str, Any]) -> None:
        for file, what in r["files"].items():
            console().print(printable(f"{file}: {what}"), markup=False)
        if r["only_in_kb"]:
            console().print(printable(f"dropped from the KB (their file was already gone): "
                                      f"{', '.join(r['only_in_kb'])}"), markup=False)
        console().print(printable(f"removed {', '.join(r['removed'])}; KB {r['content_hash'][:12]}, "
                                  f"done in {r['seconds']:.1f} s"), markup=False)

    emit(ctx, data, render)


@kb.command("doctor")
@click.option("--repair", is_flag=True, help="Re-sync Chroma from DuckDB when they differ.")
@common_options
def doctor_cmd(ctx, repair: bool) -> None:
    """Detect (and with --repair fix) drift between DuckDB and Chroma, and between the KB's objects and
    the skill files (an interrupted add, objects whose file is gone, files not ingested)."""
    from kernelskill.kb.curate import doctor_kb
    from kernelskill.kb.store import KBStore

    settings = ctx.settings()
    store = KBStore.open(settings.kb_dir, read_only=not repair, embed_settings=settings.embed)
    report = doctor_kb(settings, store, repair=repair)

    def render(r: Any) -> None:
        state = "in sync" if r.in_sync else ("repaired" if r.repaired else "DRIFT")
        console().print(f"{state}: duckdb {r.duckdb_docs} docs ({(r.duckdb_hash or '-')[:12]}), chroma "
                        f"{r.chroma_docs} docs ({(r.chroma_hash or '-')[:12]}); missing {len(r.missing)}, "
                        f"stale {len(r.stale)}, mismatched {len(r.mismatched)}")
        if r.pending_write:
            console().print("an add/import was interrupted (repair keeps or undoes its files)")
        if r.orphans:
            console().print(f"{len(r.orphans)} objects have no skill file: {printable(', '.join(r.orphans[:8]))}",
                            markup=False)
        if r.unapplied:
            console().print(f"{len(r.unapplied)} ids differ between the skill files and the KB: "
                            f"{printable(', '.join(r.unapplied[:8]))}", markup=False)
        if r.stray_temp_files:
            console().print(f"{len(r.stray_temp_files)} temporary files left by a killed write in the skills folder"
                            f"{' (deleted)' if r.repaired else ''}: {printable(', '.join(r.stray_temp_files[:8]))}",
                            markup=False)
        if r.sources_error:
            console().print(f"the skill files do not load: {printable(r.sources_error)}", markup=False)
        if r.recovered_file:
            console().print(f"objects written back to {printable(r.recovered_file)}", markup=False)

    emit(ctx, report, render)
    if not report.in_sync and not report.repaired:
        sys.exit(1)
