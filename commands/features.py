"""``kernelskill features FILE [--json] [--no-llm]``: the 18 static code features with evidence."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from kernelskill.commands._checks import FILE
from kernelskill.commands._common import Ctx, common_options, console, emit, shorten

log = logging.getLogger(__name__)

KERNEL_SUFFIXES = (".py", ".cu", ".cuh")


def feature_llm(ctx: Ctx) -> Any:
    """The configured LLM client, or None when no endpoint/key is configured."""
    settings = ctx.settings()
    if not (settings.llm.base_url or settings.llm.resolved_api_key()) and settings.llm.provider == "openai":
        log.info("no LLM endpoint configured: undecided features keep the rule defaults")
        return None, settings
    from kernelskill.pipeline.loop.llm import LLMClient

    return LLMClient.from_settings(settings.llm), settings


def _render(fs: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"features ({', '.join(fs.kernels) or 'no kernels'}; launches: "
                        f"{', '.join(fs.launches) or 'none'})")
    table.add_column("feature")
    table.add_column("value")
    table.add_column("decided")
    table.add_column("evidence")
    for name, value in fs.values.items():
        ev = fs.evidence.get(name, [])
        text = "\n".join(escape(f"L{e.line} [{e.rule}] {shorten(e.text, 90)}") for e in ev[:3]) or "-"
        table.add_row(name, str(value), "yes" if fs.decided.get(name) else "no", text)
    out = console()
    out.print(table)
    out.print(f"rule set {fs.ruleset_version}, source {fs.source_hash[:12]}"
              + (f", fallback model {fs.llm_model}" if fs.llm_model else ""))


@click.command(name="features")
@click.argument("file", type=FILE)
@click.option("--no-llm", is_flag=True, default=False, help="Rules only: never call the LLM fallback.")
@common_options
def features(ctx: Ctx, file: Path, no_llm: bool) -> None:
    """Show the 18 static code features of FILE (.py with load_inline/Triton kernels, or .cu)."""
    emit(ctx, kernel_features(ctx, file, no_llm=no_llm), _render)


def kernel_features(ctx: Ctx, file: Path, *, no_llm: bool = False) -> Any:
    """The FeatureSet of ``file`` as ``features`` shows it (the MCP tool calls this too): a file that is not a
    kernel source is refused before any LLM call; undecided features go to the configured LLM unless
    ``no_llm``."""
    from kernelskill.errors import KernelskillError
    from kernelskill.feature_rules import FeatureCache, extract_file

    if file.suffix not in KERNEL_SUFFIXES:
        raise KernelskillError(f"{file}: not a kernel source (expected {', '.join(KERNEL_SUFFIXES)})")
    rules_only = extract_file(file)  # what the rules see; refused like `query` refuses it, before any LLM call
    if not (rules_only.kernels or rules_only.launches or any(m in file.read_text(encoding="utf-8")
                                                             for m in ("__global__", "@triton.jit"))):
        raise KernelskillError(f"{file}: no kernel found (no __global__ function, no load_inline source, "
                               f"no Triton kernel, no library launch in forward)")
    if no_llm:
        return rules_only
    llm, settings = feature_llm(ctx)
    if llm is None:
        return rules_only
    from kernelskill.commands._progress import Progress

    undecided = sum(1 for decided in rules_only.decided.values() if not decided)
    with Progress("features") as progress, progress.stage(f"asking {settings.llm.model} about {undecided} "
                                                          f"feature(s) the rules leave undecided"):
        return extract_file(file, llm=llm, cache=FeatureCache(settings.cache_dir / "features.duckdb"))
