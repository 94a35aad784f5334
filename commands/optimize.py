"""``kernelskill optimize TASK``: the closed loop, with a live display; ``--resume RUN_ID`` continues a run."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import click

from kernelskill.commands._common import common_options, emit
from kernelskill.errors import KernelskillError


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
    """Round, phase, best speedup so far, tokens and cost, refreshed at every phase."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.live: Any = None
        self.state: dict[str, Any] = {}

    def __enter__(self) -> LiveDisplay:
        if self.enabled:
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


@click.command("optimize")
@click.argument("task", required=False, type=click.Path(path_type=Path))
@click.option("--rounds", type=click.IntRange(0, 1000), default=None, help="Rounds after the seed (default 15).")
@click.option("--model", default=None, help="LLM model name (default from settings).")
@click.option("--base-url", default=None, help="Any OpenAI-compatible endpoint (vLLM, Ollama, SGLang, ...).")
@click.option("--resume", "resume", default=None, metavar="RUN_ID", help="Continue a run where it stopped.")
@click.option("--parent-rule", type=click.Choice(["best", "latest_improving"]), default=None,
              help="Which accepted candidate the next round starts from.")
@click.option("--evaluator", "evaluator_spec", default=None, metavar="MODULE:ATTR",
              help="Evaluator to use instead of the local harness (a plugin seam, e.g. a remote GPU).")
@click.option("--retriever", "retriever_spec", default=None, metavar="MODULE:ATTR",
              help="Retriever to use instead of kernelskill.query.")
@common_options
def optimize(ctx, task: Path | None, rounds: int | None, model: str | None, base_url: str | None,
             resume: str | None, parent_rule: str | None, evaluator_spec: str | None,
             retriever_spec: str | None) -> None:
    """Optimize a KernelBench-format TASK with the closed loop (or --resume RUN_ID)."""
    from kernelskill.pipeline.llm import LLMClient
    from kernelskill.pipeline.loop import HarnessEvaluator, KBRetriever, Loop, LoopOptions, validate_task
    from kernelskill.pipeline.runs import RunStore

    overrides: dict[str, Any] = {}
    llm_over = {k: v for k, v in (("model", model), ("base_url", base_url)) if v is not None}
    if llm_over:
        overrides["llm"] = llm_over
    settings = ctx.settings(**overrides)
    store = RunStore(settings.runs_dir)

    # every check before any work starts: task, key, endpoint, GPU
    run = None
    if resume:
        run = store.open(resume)
        manifest = run.manifest
        if model is None and manifest.get("model"):
            settings.llm.model = manifest["model"]
        options = LoopOptions(**manifest.get("options", {}))
        if rounds is not None:
            options.rounds = rounds
        validate_task(run.task_path)
    else:
        if task is None:
            raise KernelskillError("optimize: give a TASK file (or --resume RUN_ID)")
        validate_task(task)
        options = LoopOptions(rounds=settings.loop.rounds if rounds is None else rounds,
                              parent_rule=parent_rule or settings.loop.parent_rule,
                              reask_planner=settings.loop.reask_planner)
    if parent_rule:
        options.parent_rule = parent_rule
    llm = LLMClient.from_settings(settings.llm)
    llm.check_endpoint()
    evaluator = load_object(evaluator_spec) if evaluator_spec else HarnessEvaluator(settings.harness)
    if "gpu" not in options.stop_before:
        evaluator.check()
    retriever = load_object(retriever_spec) if retriever_spec else KBRetriever(settings)

    if run is None:
        assert task is not None
        run = store.create(task, {"model": settings.llm.model, "provider": settings.llm.provider,
                                  "options": options.model_dump(exclude={"stop_before"}), "arch": settings.arch})
    gpu = {"name": "NVIDIA GPU", "arch": settings.arch, "notes": ""}
    display = LiveDisplay(enabled=not ctx.json)
    try:
        with display:
            loop = Loop(run, llm, evaluator, retriever, options, gpu=gpu, on_progress=display.update)
            result = loop.execute()
    except KeyboardInterrupt:
        click.echo(f"interrupted: resume with `kernelskill optimize --resume {run.id}`", err=True)
        sys.exit(130)
    except KernelskillError as exc:
        raise KernelskillError(f"{exc} (run {run.id}; resume with --resume {run.id})") from exc

    data = result.model_dump(exclude={"trajectory"}) | {"run_dir": str(run.path)}

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
