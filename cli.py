"""The ``kernelskill`` command: a thin click group over the library.

Subcommands load lazily (``_COMMANDS``), so ``kernelskill query`` does not pay for torch or the
optimize loop's imports.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from kernelskill import __version__
from kernelskill.commands._common import Ctx

#: command name -> "module:attribute" (a click command or group)
_COMMANDS: dict[str, str] = {
    "kb": "kernelskill.commands.kb:kb",
    "features": "kernelskill.commands.features:features",
    "query": "kernelskill.commands.query:query",
    "eval": "kernelskill.commands.evaluate:eval_cmd",
    "optimize": "kernelskill.commands.optimize:optimize",
    "runs": "kernelskill.commands.runs:runs",
    "prompts": "kernelskill.commands.prompts:prompts",
    "bench": "kernelskill.commands.bench:bench",
    "mcp": "kernelskill.commands.mcp:mcp_cmd",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _COMMANDS:
            module, _, attr = _COMMANDS[name].partition(":")
            try:
                return getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as exc:  # a room not built yet: say so when used
                message = f"command {name!r} is unavailable: {exc}"

                @click.command(name=name, help=f"(unavailable: {exc})",
                               context_settings={"ignore_unknown_options": True})
                @click.argument("args", nargs=-1, type=click.UNPROCESSED)
                def unavailable(args: tuple[str, ...]) -> None:
                    raise click.ClickException(message)

                return unavailable
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="kernelskill")
@click.option("--home", type=click.Path(path_type=Path), default=None,
              help="kernelskill home folder (default $KERNELSKILL_HOME or ~/.kernelskill).")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print JSON instead of tables.")
@click.option("-v", "--verbose", count=True)
@click.pass_context
def main(ctx: click.Context, home: Path | None, as_json: bool, verbose: int) -> None:
    """Make GPU kernels faster with curated expert knowledge."""
    ctx.obj = Ctx(home=home, json=as_json, verbose=verbose)


if __name__ == "__main__":  # pragma: no cover
    main()
