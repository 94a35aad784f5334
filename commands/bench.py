"""``kernelskill bench``: suites of optimize runs (``run``), existing solutions measured with the harness
(``eval``), and what a suite adds up to (``report``); ``pending | answer | export | import`` carry a
suite's LLM steps (one pending list, answers by request id) and its runs (one file) between machines.

Exit codes: 0 every task done; 1 some task failed (bad input, a run that stopped on an error); 3 some run
waits (an LLM answer, the GPU side, or the budget ran out): the same command continues it.
"""

from __future__ import annotations

import shlex
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import click

from kernelskill.commands._common import (
    checked_precision,
    common_options,
    console,
    emit,
    id_column,
    precision_option,
)
from kernelskill.errors import KernelskillError

PAUSED_EXIT = 3
FAILED_EXIT = 1
BASELINES = ("eager", "compile")


# shared pieces ---------------------------------------------------------------------------------------------
def _levels(values: tuple[int, ...]) -> list[int]:
    return sorted(set(values))


def _suite_path(ctx: Any, settings: Any, suite: Path | None, kind: str, tasks: list[Any],
                options: dict[str, Any]) -> Path:
    from kernelskill.pipeline.bench.suite import default_name

    return suite if suite is not None else settings.home / "suites" / default_name(kind, tasks, options)


def _protocol(settings: Any, protocol: str | None) -> str:
    from kernelskill.protocols import PRESETS, load_protocol

    name = protocol or getattr(settings.harness, "protocol", None) or "strict"
    load_protocol(name)  # a bad name or file: one line, exit 2, before anything is written
    if name not in PRESETS:
        name = str(Path(name).resolve())
    return name


def _config(run_dir: Path, seed: int | None) -> Any:
    """A run's EvalConfig, exactly as the GPU side of a split run makes it."""
    from kernelskill.pipeline.runs.gpu_side import HarnessGPU

    return HarnessGPU.config(run_dir, seed)


def evaluator_spec_for(settings: Any, spec: str | None, ray_address: str | None) -> str:
    """The evaluator asked for: ``--ray-address`` alone means ``ray``; with another ``--evaluator`` it is refused."""
    if ray_address is not None:
        if spec not in (None, "ray"):
            raise KernelskillError(f"bench: --ray-address is for --evaluator ray, not --evaluator {spec}")
        return "ray"
    return spec or settings.bench.evaluator


def make_backend(settings: Any, spec: str | None, *, need_gpu: bool, slots: int = 1,
                 ray_address: str | None = None) -> Any:
    """``local`` (a worker per visible GPU), ``ray`` (a Ray cluster: ``ray_address``, else the setting
    ``bench.ray_address``, else ``RAY_ADDRESS``, else a local instance) or ``MODULE:ATTR`` (the loop's seam)."""
    from kernelskill.commands.optimize import load_object
    from kernelskill.pipeline.runs.gpu_pool import HarnessBackend, LoopEvaluatorBackend

    spec = evaluator_spec_for(settings, spec, ray_address)
    if spec == "ray":
        from kernelskill.pipeline.bench.ray_backend import RayBackend, RayEvaluator

        return RayBackend(_config, RayEvaluator(ray_address or settings.bench.ray_address))
    if spec == "local":
        backend = HarnessBackend(_config)
        if need_gpu and backend.name == "cpu":
            raise KernelskillError("bench: no CUDA device is visible (the harness needs a GPU): plan here with "
                                   "--stop-before gpu and evaluate on a GPU machine, or --evaluator ray")
        return backend
    backend = LoopEvaluatorBackend(load_object(spec), slots=slots)
    module, _, attr = spec.rpartition(":")
    backend.spec = f"{Path(module).name}:{attr}" if module.endswith(".py") else spec  # no host path in records
    return backend


ray_address_option = click.option(
    "--ray-address", "ray_address", default=None, metavar="HOST:PORT|auto|ray://HOST:PORT",
    help="The Ray cluster to run the GPU steps on (implies --evaluator ray; overrides bench.ray_address and "
         "RAY_ADDRESS); auto: the cluster running on this machine.")


class SuiteDisplay:
    """Runs by state, GPU busy share, LLM requests in flight and the best speedups so far (rich, stderr)."""

    def __init__(self, title: str, enabled: bool) -> None:
        self.title, self.enabled = title, enabled
        self.snap: dict[str, Any] = {}
        self.live: Any = None
        self._lock = threading.Lock()

    def __enter__(self) -> SuiteDisplay:
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(get_renderable=self._render, console=Console(stderr=True), refresh_per_second=2)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def __call__(self, snap: dict[str, Any]) -> None:
        with self._lock:
            self.snap = snap

    def _render(self) -> Any:
        from rich.console import Group
        from rich.table import Table

        with self._lock:
            s = dict(self.snap)
        states = "  ".join(f"{k} {v}" for k, v in (s.get("states") or {}).items()) or "starting"
        gpu, llm = s.get("gpu") or {}, s.get("llm") or {}
        share = gpu.get("busy_share")
        left = s.get("time_left_s")
        head = (f"[bold]{self.title}[/bold]  {states}\nGPU {gpu.get('running', 0)}/{gpu.get('slots', 0)} busy, "
                f"{gpu.get('done', 0)} jobs, busy share {'-' if share is None else f'{share:.0%}'}  |  LLM "
                f"{llm.get('in_flight', 0)}/{llm.get('limit', 0)} in flight, {llm.get('requests', 0)} sent, "
                f"{llm.get('rate_limited', 0)} rate-limited  |  {s.get('elapsed_s', 0):.0f} s"
                + ("" if left is None else f", {left:.0f} s left"))
        best = sorted((r for r in s.get("runs", []) if r.get("best_speedup")), key=lambda r: -r["best_speedup"])[:8]
        table = Table("task", "state", "round", "best", title="best so far", title_justify="left")
        for r in best:
            table.add_row(r["task"], r["state"], str(r.get("round", 0)), f"{r['best_speedup']:.3f}x")
        return Group(head, table) if best else head


def _finish(ctx: Any, suite: Any, outcome: Any, kind: str) -> None:
    """Print the outcome table; exit 3 when some run waits, 1 when some task failed."""
    rows = [r.model_dump() for r in outcome.runs]
    data = {"suite": str(suite.path), "kind": kind, **outcome.model_dump(exclude={"runs"}), "runs": rows}
    waiting = [r for r in rows if r["state"] in ("paused", "budget", "not started")]
    failed = [r for r in rows if r["state"] == "failed"]
    rerun = "the same command again"
    if waiting:
        data["waiting"] = (f"{len(waiting)} run(s) wait: `kernelskill bench pending {shlex.quote(str(suite.path))}` "
                           f"lists what for; continue with {rerun}")

    def render(d: dict[str, Any]) -> None:
        from rich.table import Table

        out = console()
        table = Table("task", "state", "best", "note")
        for r in d["runs"]:
            note = r.get("error") or r.get("paused_before") or ""
            table.add_row(r["task"], r["state"], f"{r['best_speedup']:.3f}x" if r.get("best_speedup") else "-",
                          textwrap.shorten(str(note), 200, placeholder=" ..."))
        out.print(table)
        share = d.get("gpu_busy_share")
        ev = d.get("evaluator") or {}
        out.print(f"suite {d['suite']}: {len(d['runs'])} tasks in {d['elapsed_s']:.1f} s, {d['gpu_jobs']} GPU jobs"
                  + (f" (GPU busy {share:.0%})" if share is not None else "")
                  + (f", {d['gpu_retries']} retried after a worker died" if d.get("gpu_retries") else "")
                  + (f", {d['gpu_lost']} lost" if d.get("gpu_lost") else "")
                  + (f" on {ev.get('evaluator')}: {ev.get('device')}, {ev.get('slots')} slot(s)" if ev else "")
                  + (f" at {ev['ray_address']}" if ev.get("ray_address") else "")
                  + f"; report: kernelskill bench report {shlex.quote(d['suite'])}")

    emit(ctx, data, render)
    if waiting:
        click.echo(data["waiting"], err=True)
        sys.exit(PAUSED_EXIT)
    if failed:
        click.echo(f"{len(failed)} task(s) failed: see the table (and `kernelskill bench report`)", err=True)
        sys.exit(FAILED_EXIT)


def _task_refs(task_files: tuple[Path, ...], kernelbench: Path | None, levels: tuple[int, ...],
               selection: str | None) -> list[Any]:
    from kernelskill.pipeline.bench.tasks import file_tasks, kernelbench_tasks, parse_selection

    chosen = parse_selection(selection)
    refs = []
    if kernelbench is not None:
        untied = list(chosen or [])  # ids that apply to the levels named with --level
        tied = chosen.levels() if chosen is not None else []
        if not levels and (untied or not tied):
            raise KernelskillError("bench: --kernelbench needs --level N (or only level-tied ids: --tasks L1/1,L2/12)")
        refs += kernelbench_tasks(kernelbench, _levels(levels), chosen)
    elif levels or selection:
        raise KernelskillError("bench: --level and --tasks select from --kernelbench DIR")
    refs += file_tasks(list(task_files))
    if not refs:
        raise KernelskillError("bench: give TASK files or --kernelbench DIR --level N")
    return refs


@click.group("bench")
def bench() -> None:
    """Suites: many tasks optimized (or solutions measured) together, and their report."""


# run ---------------------------------------------------------------------------------------------------------
@bench.command("run")
@click.argument("task_files", nargs=-1, type=click.Path(path_type=Path))
@click.option("--kernelbench", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="A KernelBench checkout (its KernelBench/level<N>/ folders are read as they are).")
@click.option("--level", "levels", type=int, multiple=True, help="KernelBench level (repeatable).")
@click.option("--tasks", "selection", default=None, metavar="1-20,40,L2/12",
              help="Problem ids of the level(s); L2/12 picks problem 12 of level 2 only.")
@click.option("--suite", "suite_dir", type=click.Path(path_type=Path), default=None,
              help="The suite folder (default: <home>/suites/<a name fixed by the tasks and options>).")
@click.option("--rounds", type=click.IntRange(0, 1000), default=None, help="Rounds per run after the seed.")
@click.option("--budget-s", type=click.FloatRange(min=1), default=None,
              help="Start nothing that would end after this many seconds; every run is left resumable.")
@click.option("--protocol", default=None, help="Evaluation protocol: a preset (strict, kernelbench) or a file.")
@precision_option
@click.option("--baseline", type=click.Choice(BASELINES), default="compile", show_default=True,
              help="compile also times torch.compile, so the report compares against both.")
@click.option("--knowledge", type=click.Choice(["kb", "none", "profile"]), default=None,
              help="kb: plan from the knowledge base; none: the ablation arm, no retrieval; profile: the third "
                   "arm, the parent's profile and its counters but no KB content.")
@click.option("--candidates", "candidates", type=click.IntRange(1, 64), default=None, metavar="K",
              help="Candidates per round of each run, evaluated as one batch (loop.candidates_per_round).")
@click.option("--frontier", "frontier", type=click.IntRange(1, 64), default=None, metavar="F",
              help="Best correct candidates each round expands (loop.frontier).")
@click.option("--llm", "provider", type=click.Choice(["openai", "replay", "exchange"]), default=None,
              help="exchange: every run posts its LLM steps as files (`bench pending` / `bench answer`).")
@click.option("--model", default=None)
@click.option("--base-url", default=None)
@click.option("--stop-before", "stop_before", type=click.Choice(["gpu", "llm"]), multiple=True,
              help="Pause every run before that side (split suites: plan here, evaluate on the GPU box).")
@click.option("--format", "candidate_format", type=click.Choice(["load_inline", "fastpath", "triton"]), default=None)
@click.option("--evaluator", "evaluator_spec", default=None, metavar="local|ray|MODULE:ATTR",
              help="Who runs the GPU steps (default: settings bench.evaluator, local).")
@ray_address_option
@click.option("--gpu-slots", type=click.IntRange(1, 1024), default=1,
              help="Parallel workers for a MODULE:ATTR evaluator.")
@click.option("--retriever", "retriever_spec", default=None, metavar="MODULE:ATTR")
@click.option("--llm-concurrency", type=click.IntRange(1, 1024), default=None,
              help="LLM requests in flight over the suite (default: settings bench.llm_concurrency).")
@click.option("--max-active", type=click.IntRange(1, 4096), default=None, help="Runs walking at once.")
@click.option("--no-progress", is_flag=True, help="No live display.")
@click.option("--allow-weak-isolation", "allow_weak_isolation", is_flag=True, default=False,
              help="Run candidates even where the sandbox has no namespaces (process-only isolation).")
@common_options
def run_cmd(ctx, task_files: tuple[Path, ...], kernelbench: Path | None, levels: tuple[int, ...],
            selection: str | None, suite_dir: Path | None, rounds: int | None, budget_s: float | None,
            protocol: str | None, baseline: str, knowledge: str | None, provider: str | None, model: str | None,
            base_url: str | None, stop_before: tuple[str, ...], candidate_format: str | None,
            evaluator_spec: str | None, gpu_slots: int, retriever_spec: str | None, llm_concurrency: int | None,
            max_active: int | None, no_progress: bool, candidates: int | None = None,
            frontier: int | None = None, allow_weak_isolation: bool = False, precision: str | None = None,
            ray_address: str | None = None) -> None:
    """One optimize run per TASK (or per KernelBench problem), all driven together."""
    from kernelskill.commands.optimize import llm_overrides, make_retriever, say_no_gpu, target_gpu
    from kernelskill.commands.optimize import make_llm as checked_llm
    from kernelskill.pipeline.bench.driver import DriveOptions, drive
    from kernelskill.pipeline.bench.llm_gate import GatedLLMClient
    from kernelskill.pipeline.bench.suite import Suite
    from kernelskill.pipeline.harness.preflight import require_isolation
    from kernelskill.pipeline.loop import LoopOptions

    settings = ctx.settings(**llm_overrides(model, base_url, provider)).under_precision(checked_precision(precision))
    stops = sorted(set(stop_before))
    refs = _task_refs(task_files, kernelbench, levels, selection)
    proto = _protocol(settings, protocol)
    options = LoopOptions.from_settings(settings.loop, rounds=rounds, knowledge=knowledge,
                                        candidate_format=candidate_format, candidates_per_round=candidates,
                                        frontier=frontier, stop_before=stops)
    identity = {"protocol": proto, "baseline": baseline, "knowledge": getattr(options, "knowledge", "kb"),
                "candidate_format": options.candidate_format, "model": settings.llm.model,
                "provider": settings.llm.provider, "rounds": options.rounds, "precision": settings.harness.precision}
    if options.candidates_per_round > 1 or options.frontier > 1:  # a search is another suite than a single path
        identity |= {"candidates": options.candidates_per_round, "frontier": options.frontier}
    path = _suite_path(ctx, settings, suite_dir, "optimize", refs, identity)
    # every check before any work: tasks (above), protocol, GPU, endpoint. Without a CUDA device the suite
    # behaves like every command that advances a run: LLM steps go on, each run pauses before its GPU step.
    evaluator_spec = evaluator_spec_for(settings, evaluator_spec, ray_address)
    backend = make_backend(settings, evaluator_spec, need_gpu=False, slots=gpu_slots, ray_address=ray_address)
    if "gpu" not in stops and getattr(backend, "name", "") == "cpu":
        stops = sorted({*stops, "gpu"})
        options = options.model_copy(update={"stop_before": stops})
        say_no_gpu("bench: no CUDA device is visible")
    if (evaluator_spec or settings.bench.evaluator) == "local" and "gpu" not in stops:  # candidates run here
        require_isolation(allow_weak_isolation, home=str(settings.home))
    replay = checked_llm(settings, stops).replay_from
    retriever = make_retriever(settings, retriever_spec)
    suite = Suite.create_or_resume(path, "optimize", refs, identity)
    harness = settings.harness.model_dump() | {"protocol": proto, "baseline": baseline}

    def run_manifest(entry: dict[str, Any]) -> dict[str, Any]:
        return {"model": settings.llm.model_used, "provider": settings.llm.provider,
                "options": options.model_dump(exclude={"stop_before"}), "arch": settings.arch, "harness": harness,
                "protocol": Path(proto).name if proto.startswith("/") else proto, "suite": suite.path.name,
                "task_ref": {k: entry.get(k) for k in ("name", "level", "problem_id")}}

    drive_opts = DriveOptions(llm_concurrency=llm_concurrency or settings.bench.llm_concurrency,
                              max_active=max_active or settings.bench.max_active, budget_s=budget_s,
                              build_jobs=settings.harness.build_jobs or None,
                              worker_retries=settings.bench.worker_retries)
    gpu = target_gpu(settings, harness["protocol"], backend.name,  # this machine's GPU, else the arch's
                     precision=settings.harness.precision)
    display = SuiteDisplay(f"kernelskill bench {suite.path.name}", enabled=not (ctx.json or no_progress)
                           and sys.stderr.isatty())
    with display:
        outcome = drive(suite, options=options, make_llm=lambda gate: GatedLLMClient(settings.llm, gate,
                                                                                      replay_from=replay),
                        backend=backend, retriever=retriever, run_manifest=run_manifest, drive_options=drive_opts,
                        gpu=gpu, on_progress=display)
    _finish(ctx, suite, outcome, "optimize")


# eval ----------------------------------------------------------------------------------------------------------
@bench.command("eval")
@click.argument("solutions", type=click.Path(path_type=Path))
@click.option("--kernelbench", type=click.Path(path_type=Path), required=True, metavar="DIR")
@click.option("--level", "levels", type=int, multiple=True, required=True)
@click.option("--tasks", "selection", default=None, metavar="1-20,40")
@click.option("--suite", "suite_dir", type=click.Path(path_type=Path), default=None)
@click.option("--protocol", default=None)
@precision_option
@click.option("--baseline", type=click.Choice(BASELINES), default="compile", show_default=True)
@click.option("--budget-s", type=click.FloatRange(min=1), default=None)
@click.option("--evaluator", "evaluator_spec", default=None, metavar="local|ray|MODULE:ATTR")
@ray_address_option
@click.option("--gpu-slots", type=click.IntRange(1, 1024), default=1)
@click.option("--no-progress", is_flag=True)
@common_options
def eval_cmd(ctx, solutions: Path, kernelbench: Path, levels: tuple[int, ...], selection: str | None,
             suite_dir: Path | None, protocol: str | None, baseline: str, budget_s: float | None,
             evaluator_spec: str | None, gpu_slots: int, no_progress: bool, precision: str | None = None,
             ray_address: str | None = None) -> None:
    """Measure existing solutions (KernelBench's level_N_problem_P_sample_S_kernel.py files) with the harness."""
    from kernelskill.pipeline.bench.driver import DriveOptions
    from kernelskill.pipeline.bench.solutions import evaluate_solutions
    from kernelskill.pipeline.bench.suite import Suite
    from kernelskill.pipeline.bench.tasks import parse_selection, solution_tasks

    settings = ctx.settings().under_precision(checked_precision(precision))
    refs = solution_tasks(solutions, kernelbench, _levels(levels), parse_selection(selection))
    proto = _protocol(settings, protocol)
    identity = {"protocol": proto, "baseline": baseline, "precision": settings.harness.precision}
    path = _suite_path(ctx, settings, suite_dir, "eval", refs, identity)
    backend = make_backend(settings, evaluator_spec, need_gpu=True, slots=gpu_slots, ray_address=ray_address)
    suite = Suite.create_or_resume(path, "eval", refs, identity)
    harness = settings.harness.model_dump() | {"protocol": proto, "baseline": baseline}

    def run_manifest(entry: dict[str, Any]) -> dict[str, Any]:
        return {"model": None, "provider": None, "options": {}, "arch": settings.arch, "harness": harness,
                "protocol": Path(proto).name if proto.startswith("/") else proto, "suite": suite.path.name,
                "task_ref": {k: entry.get(k) for k in ("name", "level", "problem_id", "sample")}}

    display = SuiteDisplay(f"kernelskill bench eval {suite.path.name}",
                           enabled=not (ctx.json or no_progress) and sys.stderr.isatty())
    with display:
        outcome = evaluate_solutions(suite, backend=backend, run_manifest=run_manifest, on_progress=display,
                                     drive_options=DriveOptions(budget_s=budget_s,
                                                                build_jobs=settings.harness.build_jobs or None,
                                                                worker_retries=settings.bench.worker_retries))
    _finish(ctx, suite, outcome, "eval")


# report ---------------------------------------------------------------------------------------------------------
#: report and compare alike: a suite as it stood after round N
upto_round_option = click.option(
    "--upto-round", "upto_round", type=click.IntRange(0, None), default=None, metavar="N",
    help="As it stood after round N: only the events of rounds 0..N count (arms compared after the same "
         "number of rounds).")


@bench.command("report")
@click.argument("suite_dir", type=click.Path(path_type=Path))
@click.option("--html", "html_file", type=click.Path(path_type=Path), default=None,
              help="Also write the self-contained HTML page (inline SVG plots) here.")
@click.option("--md", "md_file", type=click.Path(path_type=Path), default=None, help="Also write the markdown.")
@upto_round_option
@common_options
def report_cmd(ctx, suite_dir: Path, html_file: Path | None, md_file: Path | None, upto_round: int | None) -> None:
    """Per level and overall: correctness, failure classes, fast_p vs eager and torch.compile, geomean."""
    from kernelskill.pipeline.bench.html import page
    from kernelskill.pipeline.bench.report import markdown, suite_report
    from kernelskill.pipeline.bench.suite import Suite

    report = suite_report(Suite.open(suite_dir), upto_round=upto_round)
    if html_file is not None:
        html_file.parent.mkdir(parents=True, exist_ok=True)
        html_file.write_text(page(report), encoding="utf-8")
    if md_file is not None:
        md_file.parent.mkdir(parents=True, exist_ok=True)
        md_file.write_text(markdown(report), encoding="utf-8")
    emit(ctx, report, lambda r: click.echo(markdown(r)))
    if any(t["status"] == "failed" or t.get("error") for t in report["tasks"]):
        sys.exit(FAILED_EXIT)


@bench.command("compare")
@click.argument("suite_a", type=click.Path(path_type=Path))
@click.argument("suite_b", type=click.Path(path_type=Path))
@click.option("--md", "md_file", type=click.Path(path_type=Path), default=None, help="Also write the markdown.")
@upto_round_option
@common_options
def compare_cmd(ctx, suite_a: Path, suite_b: Path, md_file: Path | None, upto_round: int | None) -> None:
    """Two suites side by side per task (an ablation arm, or a search against a single path): correct, best
    speedup against eager and torch.compile, round of the best, LLM calls; wins, ties and geomeans."""
    from kernelskill.pipeline.bench.compare import compare, markdown
    from kernelskill.pipeline.bench.report import suite_report
    from kernelskill.pipeline.bench.suite import Suite

    data = compare(suite_report(Suite.open(suite_a), upto_round=upto_round),
                   suite_report(Suite.open(suite_b), upto_round=upto_round))
    if md_file is not None:
        md_file.parent.mkdir(parents=True, exist_ok=True)
        md_file.write_text(markdown(data), encoding="utf-8")
    emit(ctx, data, lambda d: click.echo(markdown(d)))


# split suites: pending, answer, export, import ------------------------------------------------------------------
@bench.command("pending")
@click.argument("suite_dir", type=click.Path(path_type=Path))
@common_options
def pending_cmd(ctx, suite_dir: Path) -> None:
    """Every step the suite's runs wait for, with a request id unique in the suite (RUN:STEP)."""
    from kernelskill.pipeline.bench.suite import Suite
    from kernelskill.pipeline.runs import pending_steps

    suite = Suite.open(suite_dir)
    rows = []
    for _entry, run in suite.runs():
        if run is None:
            continue
        for step in pending_steps(run):
            rows.append({"request": f"{run.id}:{step['id']}", "run": run.id, "side": step["side"],
                         "role": step.get("role"), "prompt": str(run.path / step["prompt"]) if step.get("prompt")
                         else None, "candidate": step.get("candidate")})

    def render(items: list[dict[str, Any]]) -> None:
        from rich.table import Table

        table = Table("side", "role", "prompt / candidate")
        id_column(table, "request", [r["request"] for r in items])
        for r in items:
            table.add_row(r["side"], r["role"] or "-", r["prompt"] or r["candidate"] or "-", r["request"])
        out = console()
        out.print(table if items else "nothing pending")
        if any(r["side"] == "llm" and r["prompt"] for r in items):
            out.print(f"answer with `kernelskill bench answer {shlex.quote(str(suite_dir))} REQUEST ANSWER_FILE`, "
                      "then run the suite's command again")

    emit(ctx, rows, render)


@bench.command("answer")
@click.argument("suite_dir", type=click.Path(path_type=Path))
@click.argument("request_id")
@click.argument("answer_file", type=click.File("r", encoding="utf-8"))
@click.option("--by", default="bench answer", show_default=True, help="Who wrote the answer (the report credits it).")
@common_options
def answer_cmd(ctx, suite_dir: Path, request_id: str, answer_file: Any, by: str) -> None:
    """Store the answer of one pending LLM request (RUN:STEP from `bench pending`), checked like an API answer."""
    from kernelskill.commands.runs import answer_step
    from kernelskill.pipeline.bench.suite import Suite
    from kernelskill.pipeline.runs import RunStore

    suite = Suite.open(suite_dir)
    run_id, sep, step = request_id.partition(":")
    if not sep or not step:
        raise KernelskillError(f"bench answer: {request_id!r} is not RUN:STEP (see `kernelskill bench pending`)")
    run = RunStore(suite.runs_dir).open(run_id)
    data = answer_step(ctx, run, step, answer_file.read(), by=by, source=getattr(answer_file, "name", "<stdin>"))
    emit(ctx, data, lambda d: click.echo(f"stored the answer for {request_id}"))


@bench.command("export")
@click.argument("suite_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, metavar="FILE.tar")
@common_options
def export_cmd(ctx, suite_dir: Path, output: Path) -> None:
    """Every run of the suite in ONE file (for the GPU side: gpu_side --import FILE.tar)."""
    from kernelskill.pipeline.bench.suite import Suite
    from kernelskill.pipeline.runs.portable import export_runs

    suite = Suite.open(suite_dir)
    runs = [run.path for _e, run in suite.runs() if run is not None]
    path, problems = export_runs(runs, output)
    emit(ctx, {"bundle": str(path), "runs": len(runs) - len(problems), "left_out": problems},
         lambda d: click.echo(f"{d['runs']} runs in {d['bundle']}"
                              + "".join(f"\nleft out: {p}" for p in d["left_out"])))
    if problems:
        sys.exit(FAILED_EXIT)


@bench.command("import")
@click.argument("suite_dir", type=click.Path(path_type=Path))
@click.argument("bundle", type=click.Path(path_type=Path))
@common_options
def import_cmd(ctx, suite_dir: Path, bundle: Path) -> None:
    """Take the runs of a bundle (gpu_side --export-to FILE.tar) back into the suite; a run is replaced only
    when the bundle's log extends the local one (nothing recorded here is lost)."""
    from kernelskill.pipeline.bench.suite import Suite
    from kernelskill.pipeline.runs import MANIFEST
    from kernelskill.pipeline.runs.portable import import_runs

    suite = Suite.open(suite_dir)
    known = {e["run_id"] for e in suite.tasks if e.get("run_id")}
    paths = import_runs(bundle, suite.runs_dir, replace=True, require=(MANIFEST,))
    strangers = [p.name for p in paths if p.name not in known]
    emit(ctx, {"imported": [p.name for p in paths], "not_in_suite": strangers},
         lambda d: click.echo(f"imported {len(d['imported'])} runs into {suite.runs_dir}"
                              + (f"; not tasks of this suite: {', '.join(strangers)}" if strangers else "")))
