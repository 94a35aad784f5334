"""Options and rendering shared by every CLI command.

Every command takes ``--home PATH`` and ``--json``; library errors (:class:`KernelskillError`)
become one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kernelskill.errors import KernelskillError, printable


@dataclass
class Ctx:
    home: Path | None
    json: bool
    verbose: int = 0

    def settings(self, **overrides: Any):  # -> Settings (imported lazily for start-up speed)
        from kernelskill.config import load_settings
        from kernelskill.pipeline.runs.redact import register_settings

        settings = load_settings(home=self.home, overrides=overrides or None)
        register_settings(settings)  # every configured key and secret-file value is redacted from now on
        return settings


def to_jsonable(data: Any) -> Any:
    """Plain JSON values; a non-finite float (NaN, inf) becomes null: JSON has no such numbers."""
    if hasattr(data, "model_dump"):
        return to_jsonable(data.model_dump(mode="json"))
    if isinstance(data, list | tuple):
        return [to_jsonable(d) for d in data]
    if isinstance(data, dict):
        return {k: to_jsonable(v) for k, v in data.items()}
    if isinstance(data, Path):
        return str(data)
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


def json_text(data: Any) -> str:
    """``data`` as the text ``--json`` prints (the MCP server returns the same)."""
    return json.dumps(to_jsonable(data), indent=2, sort_keys=False, default=str, allow_nan=False)


def emit(ctx: Ctx, data: Any, render: Callable[[Any], None] | None = None) -> None:
    """Print ``data`` as JSON (``--json``) or through ``render`` (rich)."""
    if ctx.json or render is None:
        click.echo(json_text(data))
    else:
        render(data)


#: the width given to rich when stdout is not a terminal: wide enough that no table or line is wrapped or
#: cropped (tables keep their natural width; nothing here expands to the console width)
PIPE_WIDTH = 10_000


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def console():
    """The rich console of a command: the terminal's width on a terminal; otherwise whole lines (no
    wrapping or cropping, so ids, names and reasons reach a pipe or a file in full)."""
    from rich.console import Console

    if stdout_is_terminal():
        return Console()
    return Console(width=PIPE_WIDTH, soft_wrap=True)


def print_whole(renderable: Any) -> None:
    """Print a table at its natural width even when the terminal is narrower (the terminal then wraps the
    long lines, but rich neither squeezes columns to nothing nor crops ids)."""
    from rich.console import Console
    from rich.measure import Measurement

    con = console()
    natural = Measurement.get(con, con.options.update_width(PIPE_WIDTH), renderable).maximum
    if natural > con.width:
        con = Console(width=natural)
    con.print(renderable, crop=False)


def id_column(table: Any, header: str, values: list[str]) -> None:
    """Add a column of ids (run ids, step ids) that rich never wraps or shortens, even on a narrow
    terminal: the id is what the user types next."""
    width = max([len(header), *(len(v) for v in values)])
    table.add_column(header, no_wrap=True, min_width=width, overflow="fold")


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with an ellipsis when cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "\u2026"


def common_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--home`` and ``--json`` to a command and pass a :class:`Ctx` as ``ctx``."""

    @click.option("--home", type=click.Path(path_type=Path), default=None,
                  help="kernelskill home folder (default $KERNELSKILL_HOME or ~/.kernelskill).")
    @click.option("--json", "as_json", is_flag=True, default=False, help="Print JSON instead of tables.")
    @click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
    @click.pass_context
    @functools.wraps(fn)
    def wrapper(click_ctx: click.Context, *args: Any, home: Path | None, as_json: bool, verbose: int,
                **kwargs: Any) -> Any:
        parent = click_ctx.find_object(Ctx)
        ctx = Ctx(home=home or (parent.home if parent else None),
                  json=as_json or bool(parent and parent.json),
                  verbose=max(verbose, parent.verbose if parent else 0))
        _setup_logging(ctx.verbose)
        try:
            return fn(ctx, *args, **kwargs)
        except KernelskillError as exc:
            click.echo(f"error: {printable(exc)}", err=True)
            sys.exit(exc.exit_code)

    return wrapper


PRECISION_HELP = ("The dtype the task is evaluated in: fp32 (the task as written), bf16 or fp16 (its floating "
                  "inputs, weights and buffers cast, as KernelBench does; the protocol's tolerance for that dtype). "
                  "Default from settings: harness.precision.")


def precision_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--precision fp32|bf16|fp16`` (checked in the command, :func:`checked_precision`: a bad value is one
    line and exit 2, like every other bad input)."""
    return click.option("--precision", "precision", default=None, metavar="fp32|bf16|fp16", help=PRECISION_HELP)(fn)


def checked_precision(value: str | None) -> str | None:
    """``--precision``'s value when given and valid, ``None`` when not given; a bad value raises."""
    from kernelskill.protocols import check_precision

    return None if value is None else check_precision(value)


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)
