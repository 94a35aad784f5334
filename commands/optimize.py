"""``kernelskill optimize TASK``: the closed loop, with a live display; ``--resume RUN_ID`` continues a run.

``--llm exchange`` answers LLM steps through files (a person or another agent answers with ``kernelskill
runs answer``); ``--stop-before gpu|llm`` runs until the run needs the other side of a split run. A paused
run exits with code 3 and a message naming the step it waits for and the command that answers it.
"""

from __future__ import annotations

import importlib
import importlib.util
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from kernelskill.commands._common import checked_precision, common_options, emit, precision_option
from kernelskill.errors import KernelskillError
from kernelskill.protocols import PRESETS, load_protocol


def load_object(spec: str) -> Any:
    """``package.module:attr`` or ``path/to/file.py:attr``; a class or factory is called with no arguments."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise KernelskillError(f"{spec}: expected MODULE:ATTRIBUTE or FILE.py:ATTRIBUTE")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise KernelskillError(f"{path}: file not found")
        mod_spec = importlib.util.spec_from_file_location(f"_kernelskill_plugin_{path.stem}", path)
        assert mod_spec is not None and mod_spec.loader is not None
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise KernelskillError(f"{spec}: cannot import {module_name}: {exc}") from exc
    try:
        obj = getattr(module, attr)
    except AttributeError as exc:
        raise KernelskillError(f"{spec}: {module_name} has no {attr}") from exc
    return obj() if callable(obj) else obj


class LiveDisplay:
    """Round, phase, best speedup so far, tokens and cost, refreshed at every phase: a live table on a
    terminal; when stderr is not one (a pipe, a log file), one line per phase."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.live: Any = None
        self.lines = enabled and not sys.stderr.isatty()
        self.state: dict[str, Any] = {}
        self._last = ""

    def __enter__(self) -> LiveDisplay:
        if self.enabled and not self.lines:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(self._table(), console=Console(stderr=True), refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, state: dict[str, Any]) -> None:
        self.state = state
        if self.live is not None:
            self.live.update(self._table())
        elif self.lines:
            best = state.get("best_speedup")
            line = (f"optimize {state.get('run', '')}: round {state.get('round', 0)}/{state.get('rounds', '?')} "
                    f"{state.get('phase', 'start')}; best {f'{best:.3f}x' if best else '-'}, "
                    f"{state.get('tokens', 0)} tokens, ${state.get('cost_usd', 0.0):.4f}")
            if line != self._last:
                self._last = line
                print(line, file=sys.stderr, flush=True)

    def _table(self) -> Any:
        from rich.table import Table

        s = self.state
        table = Table(title=f"kernelskill optimize {s.get('run', '')}", show_header=True)
        for name in ("round", "phase", "best speedup", "tokens", "cost"):
            table.add_column(name, justify="right" if name != "phase" else "left")
        best = s.get("best_speedup")
        table.add_row(f"{s.get('round', 0)}/{s.get('rounds', '?')}", str(s.get("phase", "start")),
                      f"{best:.3f}x" if best else "-", str(s.get("tokens", 0)), f"${s.get('cost_usd', 0.0):.4f}")
        return table


STOP_SIDES = ("gpu", "llm")
LLM_PROVIDERS = ("openai", "replay", "exchange")
PAUSED_EXIT = 3


def llm_overrides(model: str | None, base_url: str | None, provider: str | None) -> dict[str, Any]:
    llm = {k: v for k, v in (("model", model), ("base_url", base_url), ("provider", provider)) if v is not None}
    return {"llm": llm} if llm else {}


#: harness settings a resumed run takes from this machine, not from its manifest
RESUME_KEEPS_LOCAL = frozenset({"build_jobs"})


def resumed_options(run: Any, settings: Any, stop_before: list[str], rounds: int | None = None,
                    parent_rule: str | None = None, provider: str | None = None) -> Any:
    """The loop options of an existing run (its manifest), and the settings it needs to go on."""
    from kernelskill.pipeline.loop import LoopOptions, validate_task

    manifest = run.manifest
    if manifest.get("model") and manifest.get("provider") != "exchange" and settings.llm.model != manifest["model"]:
        settings.llm.model = manifest["model"]  # an exchange run names no model: a provider switch keeps yours
    if provider is None and manifest.get("provider") and settings.llm.provider == "openai":
        settings.llm.provider = manifest["provider"]  # a run answered through files stays so
    recorded = manifest.get("harness") or {}
    # the run goes on judged as it started (its protocol, precision, tolerances, trials and limits: a parent
    # and its child are compared under one protocol), whatever this machine's settings say; how many
    # builds run at once is this machine's own
    for name, value in recorded.items():
        if name in type(settings.harness).model_fields and name not in RESUME_KEEPS_LOCAL:
            setattr(settings.harness, name, checked_precision(value) if name == "precision" else value)
    options = LoopOptions(**manifest.get("options", {}))
    if rounds is not None:
        options.rounds = rounds
    if parent_rule:
        options.parent_rule = parent_rule
    options.stop_before = list(stop_before)
    validate_task(run.task_path)
    return options


def make_llm(settings: Any, stop_before: list[str], *, check: bool = True) -> Any:
    """The LLM client; its endpoint is checked first unless the run will not reach the LLM side."""
    from kernelskill.pipeline.loop.llm import LLMClient

    llm = LLMClient.from_settings(settings.llm)
    if check and "llm" not in stop_before:
        llm.check_endpoint()
    return llm


def make_evaluator(settings: Any, spec: str | None, stop_before: list[str]) -> Any:
    from kernelskill.pipeline.loop import HarnessEvaluator

    evaluator = load_object(spec) if spec else HarnessEvaluator(settings.harness,
                                                                cache_dir=settings.cache_dir / "builds")
    if "gpu" not in stop_before:
        evaluator.check()
    return evaluator


def gpu_stops(evaluator: Any, stops: list[str]) -> tuple[list[str], str | None]:
    """The stops of a command that advances a run, and why it cannot take GPU steps here (or None).

    Every such command behaves alike: without a usable GPU (no CUDA device visible) the run goes on with
    its LLM steps up to its next GPU step and pauses before it (exit code 3, the message names the
    commands that continue it), as ``--stop-before gpu`` would."""
    if "gpu" in stops:
        return stops, None
    try:
        evaluator.check()
    except KernelskillError as exc:
        return sorted({*stops, "gpu"}), str(exc)
    return stops, None


def say_no_gpu(reason: str | None) -> None:
    if reason:
        click.echo(f"{reason}: the run goes on up to its next GPU step and pauses there (exit code 3)", err=True)


def make_retriever(settings: Any, spec: str | None) -> Any:
    from kernelskill.pipeline.loop import KBRetriever

    return load_object(spec) if spec else KBRetriever(settings)


def ks(ctx: Any, args: str) -> str:
    """The exact command line ``kernelskill ARGS`` for this home."""
    return f"kernelskill {args}" + (f" --home {shlex.quote(str(ctx.home))}" if ctx.home else "")


def waiting_message(ctx: Any, run: Any) -> str:
    """One line: what a paused run waits for and the exact command that supplies it."""
    from kernelskill.pipeline.runs import pending_steps

    rid = shlex.quote(run.id)
    resume = ks(ctx, f"runs resume {rid}")
    steps = pending_steps(run)
    if not steps:
        return f"run {run.id} is paused; continue with `{resume}`"
    step = steps[0]
    if step["side"] == "llm" and step.get("prompt"):
        answer = ks(ctx, f"runs answer {rid} {step['id']} ANSWER_FILE")
        return (f"run {run.id} waits for the {step['role']} answer of LLM step {step['id']}: read "
                f"{run.path / step['prompt']}, then `{answer}` and `{resume}`")
    if step["side"] == "llm":
        return f"run {run.id} waits for LLM step {step['id']}: `{resume}` on the LLM side"
    return (f"run {run.id} waits for GPU step {step['id']} ({step['role']} {step.get('candidate')}): on a GPU "
            f"machine `python -m kernelskill.pipeline.runs.gpu_side {shlex.quote(str(run.path.parent))}` (carry it with "
            f"`{ks(ctx, f'runs export {rid}')}`), or `{resume}` where CUDA is")


def target_gpu(settings: Any, protocol: str | None, device_name: str | None = None,
               arch: str | None = None, precision: str | None = None) -> dict[str, Any]:
    """The target GPU as the prompts describe it: the protocol's contract (with the precision the task runs in)
    and the facts of ``device_name`` when a GPU is visible, else of the arch's default GPU (a split run plans
    here for the GPU box)."""
    from kernelskill.pipeline.loop.agents import default_gpu

    name = device_name if device_name and device_name.lower() != "cpu" else None
    return default_gpu(arch or settings.arch, name=name, protocol=protocol or settings.harness.protocol,
                       precision=precision or settings.harness.precision)


def run_gpu(run: Any, settings: Any) -> dict[str, Any]:
    """:func:`target_gpu` for a run: its own arch, protocol and precision (from its manifest, so a resumed run
    keeps what it started with)."""
    return target_gpu(settings, run.protocol, arch=run.manifest.get("arch"), precision=run.precision)


def execute(ctx: Any, run: Any, llm: Any, evaluator: Any, retriever: Any, options: Any, settings: Any,
            display: bool = True) -> Any:
    from kernelskill.pipeline.loop import Loop

    gpu = run_gpu(run, settings)  # `prompts render` shows the same
    live = LiveDisplay(enabled=display and not ctx.json)
    try:
        with live:
            return Loop(run, llm, evaluator, retriever, options, gpu=gpu, on_progress=live.update).execute()
    except KeyboardInterrupt:
        click.echo(f"interrupted: resume with `kernelskill optimize --resume {run.id}`", err=True)
        sys.exit(130)
    except KernelskillError as exc:
        raise KernelskillError(f"{exc} (run {run.id}; resume with --resume {run.id})",
                               exit_code=exc.exit_code) from exc


def result_data(ctx: Any, run: Any, result: Any) -> dict[str, Any]:
    """The JSON of a loop's outcome: the result without its trajectory, the run folder, and for a paused run
    the one line saying what it waits for."""
    data = result.model_dump(exclude={"trajectory"}) | {"run_dir": str(run.path)}
    if result.status == "paused":
        data["waiting"] = waiting_message(ctx, run)
    return data


def report_result(ctx: Any, run: Any, result: Any) -> None:
    """Print the outcome; a paused run says what it waits for on stderr and exits with code 3."""
    data = result_data(ctx, run, result)

    def render(d: dict[str, Any]) -> None:
        from kernelskill.commands._common import console

        out = console()
        best = d.get("best")
        if d["status"] != "finished":
            out.print(f"run {d['run_id']}: {d['status']} before {d.get('paused_before')}")
            return
        if best:
            verified = best.get("verified_speedup")
            out.print(f"run {d['run_id']}: best [bold]{best['speedup']:.3f}x[/bold] over eager "
                      f"(re-verified {verified:.3f}x on a fresh seed), {best['candidate']}"
                      if isinstance(verified, float) else f"run {d['run_id']}: best {best['speedup']:.3f}x")
            out.print(f"best kernel: {run.path / 'best.py'}\nreport: {run.path / 'report.md'}")
        else:
            out.print(f"run {d['run_id']}: no correct candidate; report: {run.path / 'report.md'}")
        out.print(f"{d['tokens']} tokens, ${d['cost_usd']:.4f}")

    emit(ctx, data, render)
    if result.status == "paused":
        click.echo(("" if ctx.json else "\n") + data["waiting"], err=True)  # after the live table
        sys.exit(PAUSED_EXIT)


@click.command("optimize")
@click.argument("task", required=False, type=click.Path(path_type=Path))
@click.option("--rounds", type=click.IntRange(0, 1000), default=None, help="Rounds after the seed (default 15).")
@click.option("--model", default=None, help="LLM model name (default from settings).")
@click.option("--base-url", default=None, help="Any OpenAI-compatible endpoint (vLLM, Ollama, SGLang, ...).")
@click.option("--llm", "provider", type=click.Choice(LLM_PROVIDERS), default=None,
              help="LLM provider: openai (any compatible endpoint), replay, or exchange (answers through files, "
                   "`kernelskill runs answer`; no key needed).")
@click.option("--stop-before", "stop_before", type=click.Choice(STOP_SIDES), multiple=True,
              help="Pause before the first step of that side (split runs: plan here, evaluate there).")
@click.option("--resume", "resume", default=None, metavar="RUN_ID", help="Continue a run where it stopped.")
@click.option("--format", "candidate_format", type=click.Choice(["load_inline", "fastpath", "triton"]), default=None,
              help="What candidates the LLM writes: load_inline extensions, or the harness's fast path "
                   "(nvcc -cubin kernels launched without a C++ extension; builds in about a second), or Triton "
                   "(@triton.jit kernels launched from forward).")
@click.option("--knowledge", type=click.Choice(["kb", "none", "profile"]), default=None,
              help="kb (default): the planner chooses among the knowledge base's permitted methods; none: the "
                   "ablation arm, the same loop with no profile, no query and no retrieved knowledge; profile: "
                   "the third arm, no KB content but the parent's profile and its measured counters.")
@click.option("--parent-rule", type=click.Choice(["best", "latest_improving"]), default=None,
              help="Which accepted candidate the next round starts from.")
@click.option("--candidates", "candidates", type=click.IntRange(1, 64), default=None, metavar="K",
              help="Candidates written and evaluated per round, as one batch (default from settings: "
                   "loop.candidates_per_round; 1 is the single path).")
@click.option("--frontier", "frontier", type=click.IntRange(1, 64), default=None, metavar="F",
              help="How many of the best correct candidates each round expands (loop.frontier).")
@click.option("--protocol", default=None, metavar="NAME|FILE",
              help="Evaluation protocol the candidates are judged by and the prompts state: strict, kernelbench "
                   "or a protocol file (default from settings: harness.protocol).")
@precision_option
@click.option("--evaluator", "evaluator_spec", default=None, metavar="MODULE:ATTR",
              help="Evaluator to use instead of the local harness (a plugin seam, e.g. a remote GPU).")
@click.option("--retriever", "retriever_spec", default=None, metavar="MODULE:ATTR",
              help="Retriever to use instead of kernelskill.query.")
@click.option("--allow-weak-isolation", "allow_weak_isolation", is_flag=True, default=False,
              help="Run candidates even where the sandbox has no namespaces (process-only isolation: generated "
                   "code could read this user's files and reach the network).")
@common_options
def optimize(ctx, task: Path | None, rounds: int | None, model: str | None, base_url: str | None,
             provider: str | None, stop_before: tuple[str, ...], resume: str | None, parent_rule: str | None,
             candidate_format: str | None, knowledge: str | None, evaluator_spec: str | None,
             retriever_spec: str | None, protocol: str | None = None, candidates: int | None = None,
             frontier: int | None = None, allow_weak_isolation: bool = False, precision: str | None = None) -> None:
    """Optimize a KernelBench-format TASK with the closed loop (or --resume RUN_ID)."""
    from kernelskill.pipeline.harness.preflight import require_isolation
    from kernelskill.pipeline.loop import LoopOptions, validate_task
    from kernelskill.pipeline.runs import RunStore

    settings = ctx.settings(**llm_overrides(model, base_url, provider))
    precision = checked_precision(precision)
    if precision is not None and resume:
        raise KernelskillError("--precision: a resumed run keeps the precision it started with")
    if precision is not None:  # recorded in the run's manifest with the harness settings (harness.precision)
        settings.harness.precision = precision  # type: ignore[assignment]
    if protocol:  # checked now (exit 2 on a bad name or file); the run's manifest records it with the harness
        load_protocol(protocol)
        settings.harness.protocol = protocol if protocol in PRESETS else str(Path(protocol).resolve())
    store = RunStore(settings.runs_dir)
    stops = sorted(set(stop_before))

    # every check before any work starts: task, key, endpoint, GPU (without one: pause before GPU steps)
    evaluator = make_evaluator(settings, evaluator_spec, ["gpu"])
    stops, no_gpu = gpu_stops(evaluator, stops)
    if evaluator_spec is None and "gpu" not in stops:  # candidates run here: in a sandbox, or not at all
        require_isolation(allow_weak_isolation, home=str(settings.home))
    run = None
    if resume:
        run = store.open(resume)
        options = resumed_options(run, settings, stops, rounds, parent_rule, provider)
    else:
        if task is None:
            raise KernelskillError("optimize: give a TASK file (or --resume RUN_ID)")
        validate_task(task)
        options = LoopOptions.from_settings(settings.loop, rounds=rounds, parent_rule=parent_rule,
                                            candidate_format=candidate_format, knowledge=knowledge,
                                            candidates_per_round=candidates, frontier=frontier,
                                            stop_before=stops)
    llm = make_llm(settings, stops)
    retriever = make_retriever(settings, retriever_spec)

    if run is None:
        assert task is not None
        run = store.create(task, {"model": settings.llm.model_used, "provider": settings.llm.provider,
                                  "options": options.model_dump(exclude={"stop_before"}), "arch": settings.arch,
                                  "harness": settings.harness.model_dump()})
    say_no_gpu(no_gpu)
    report_result(ctx, run, execute(ctx, run, llm, evaluator, retriever, options, settings))
