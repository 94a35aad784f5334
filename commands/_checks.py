"""Input checks shared by the commands: every refusal is one line (``error: ...``) and exit code 2.

- :data:`FILE`: a click parameter type for an existing file; a directory or a missing path is one line,
  not click's usage text. :data:`OUT_FILE`: a file to write (a directory is refused the same way).
- :func:`check_task`: a KernelBench task defines ``class Model`` and ``get_inputs``; a candidate given
  where the task belongs (``ModelNew``) gets a hint about the order of the arguments.
- :func:`check_context`: ``--context KEY=VALUE`` against the KB's context fields (type, domain, range).
- :func:`check_choice`: a filter value against the ids that exist (bottlenecks, methods).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click

from kernelskill.errors import KernelskillError


class OneLineError(click.ClickException):
    """A bad argument caught by click's type conversion, shown like a :class:`KernelskillError`."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class ExistingFile(click.ParamType):
    """An existing, readable file (``path_type`` Path); anything else is one line, exit 2."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(value)
        what = f"{param.opts[0]} " if param is not None and param.param_type_name == "option" and param.opts else ""
        if path.is_dir():
            raise OneLineError(f"{what}{path}: is a directory, expected a file")
        if not path.exists():
            noun = {"kernel": "kernel ", "task": "task ", "profile_path": "profile "}.get(param.name or "", "") \
                if param is not None else ""
            raise OneLineError(f"{what}{path}: no such {noun}file")
        if not path.is_file():
            raise OneLineError(f"{what}{path}: not a regular file")
        return path


FILE = ExistingFile()


class OutputFile(click.ParamType):
    """A file to write (it may exist; its folder is created): a directory is refused in one line."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(value)
        what = f"{param.opts[0]} " if param is not None and param.param_type_name == "option" and param.opts else ""
        if path.is_dir():
            raise OneLineError(f"{what}{path}: is a directory, expected a file to write")
        return path


OUT_FILE = OutputFile()


def _top_level(path: Path) -> tuple[set[str], set[str]]:
    """Class and function names defined at the top level of a Python file."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise KernelskillError(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelskillError(f"{path}: cannot read: {exc}") from exc
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return classes, funcs


def looks_like_task(path: Path) -> bool:
    try:
        classes, funcs = _top_level(path)
    except KernelskillError:
        return False
    return "Model" in classes and "get_inputs" in funcs


def check_task(path: Path, *, option: str = "TASK", other: Path | None = None) -> None:
    """Refuse a file that is not a KernelBench task (``class Model`` and ``get_inputs``).

    ``other`` is the candidate given with it: when the two look swapped, the error says so."""
    if path.suffix != ".py":
        raise KernelskillError(f"{option} {path}: not a KernelBench task (expected a .py file defining "
                               f"class Model and get_inputs)")
    classes, funcs = _top_level(path)
    missing = [name for name, ok in (("class Model", "Model" in classes), ("get_inputs", "get_inputs" in funcs))
               if not ok]
    if not missing:
        return
    hint = ""
    if "ModelNew" in classes:
        hint = " (it defines ModelNew: it is a candidate"
        hint += (f", and {other} is a task: did you swap TASK and KERNEL?)"
                 if other is not None and looks_like_task(other) else ")")
    raise KernelskillError(f"{option} {path}: not a KernelBench task (no {' and no '.join(missing)}){hint}")


def _cast(field: Any, raw: Any) -> Any:
    kind = field.type
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        raise ValueError("expected true or false")
    if kind == "int":
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValueError("expected an integer")
        return raw
    if kind == "float":
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ValueError("expected a number")
        return float(raw)
    return str(raw)


def check_context(values: Mapping[str, Any], fields: Iterable[Any]) -> dict[str, Any]:
    """``--context`` values checked against the KB's context fields; returns them cast to each field's type."""
    known = {f.id: f for f in fields if str(getattr(f.kind, "value", f.kind)) == "context"}
    out: dict[str, Any] = {}
    for key, raw in values.items():
        field = known.get(key)
        if field is None:
            raise KernelskillError(f"--context {key}: unknown context field (valid: {', '.join(sorted(known))})")
        try:
            value = _cast(field, raw)
        except ValueError as exc:
            raise KernelskillError(f"--context {key}={raw}: {exc} ({field.type} field)") from None
        if field.domain and value not in field.domain:
            raise KernelskillError(f"--context {key}={raw}: not one of {', '.join(map(str, field.domain))}")
        if field.min is not None and isinstance(value, int | float) and value < field.min:
            raise KernelskillError(f"--context {key}={raw}: below the minimum {field.min:g}")
        if field.max is not None and isinstance(value, int | float) and value > field.max:
            raise KernelskillError(f"--context {key}={raw}: above the maximum {field.max:g}")
        out[key] = value
    return out


def check_choice(option: str, value: str | None, valid: Iterable[str]) -> None:
    """Refuse a filter value that names nothing in the KB, listing the valid ones."""
    if value is None:
        return
    ids = sorted(set(valid))
    if value not in ids:
        raise KernelskillError(f"{option} {value}: unknown (valid: {', '.join(ids)})")
