"""Bounds on text that comes from outside a run (an LLM answer, an answer file, an imported archive).

Such text is checked *before* anything is recorded or parsed by code that recurses: at most
:data:`MAX_ANSWER_CHARS` characters, brackets nested at most :data:`MAX_NESTING` deep, no run of more
than :data:`MAX_UNARY_RUN` prefix operators (``- - - - 1``), and JSON at most :data:`MAX_JSON_DEPTH` deep.
The checks are linear scans: a 200,000-character answer costs milliseconds and never reaches Python's
recursion limit or the parser's stack. The safe parsers below turn whatever the parsers still raise
(RecursionError, MemoryError, "too many nested parentheses") into a reason.

Standard library only (the GPU side imports the run package on a bare box).
"""

from __future__ import annotations

import ast
import json
import os
import stat
from pathlib import Path
from typing import Any

from kernelskill.expr import ast_depth

MAX_ANSWER_CHARS = 256 * 1024
MAX_NESTING = 100
MAX_UNARY_RUN = 100
MAX_JSON_DEPTH = 32
MAX_AST_DEPTH = 200
MAX_ANSWER_FILE_BYTES = 4 * MAX_ANSWER_CHARS
#: a run's event log: read (and imported) only within these (a real run's log holds a few MB, some hundred lines)
MAX_EVENT_LOG_BYTES = 64 * 2**20
MAX_EVENT_LOG_LINES = 100_000

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = set(_OPEN.values())
_UNARY = set("-+~!")


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of ``text`` (strings are not skipped: a bound, not a parser)."""
    depth = deepest = 0
    for ch in text:
        if ch in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in _CLOSE and depth:
            depth -= 1
    return deepest


def longest_unary_run(text: str) -> int:
    """The longest run of prefix operators (``-``, ``+``, ``~``, ``!``) with only blanks between them."""
    longest = run = 0
    for ch in text:
        if ch in _UNARY:
            run += 1
            if run > longest:
                longest = run
        elif ch not in " \t":
            run = 0
    return longest


def text_problem(text: str) -> str:
    """Why ``text`` is refused before it is parsed or stored ("" when it is within bounds)."""
    if not isinstance(text, str):
        return "the answer is not text"
    if len(text) > MAX_ANSWER_CHARS:
        return f"the answer is {len(text):,} characters long (at most {MAX_ANSWER_CHARS:,})"
    depth = nesting_depth(text)
    if depth > MAX_NESTING:
        return f"brackets nest {depth} levels deep (at most {MAX_NESTING})"
    run = longest_unary_run(text)
    if run > MAX_UNARY_RUN:
        return f"a chain of {run} prefix operators (at most {MAX_UNARY_RUN})"
    return ""


def decode_text(data: bytes, source: str, limit: int = MAX_ANSWER_FILE_BYTES) -> tuple[str | None, str]:
    """``(text, "")`` for UTF-8 bytes within the size bound, else ``(None, reason)``."""
    if len(data) > limit:
        return None, f"{source}: {len(data):,} bytes (at most {limit:,})"
    try:
        return data.decode("utf-8-sig"), ""
    except UnicodeDecodeError as exc:
        return None, f"{source}: not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})"


def read_bounded(path: Path, limit: int) -> tuple[bytes | None, str]:
    """The bytes of a regular file of at most ``limit`` bytes: ``(data, "")``; ``(None, "")`` when there is
    no such path; ``(None, reason)`` for a folder, a symbolic link (never followed: a link to /dev/zero is
    not read), a device or FIFO, or a file over the limit. The size is checked before anything is read, and
    never more than ``limit + 1`` bytes are read (a file that grows meanwhile is refused too)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return None, "a symbolic link, not a file"
    if stat.S_ISDIR(st.st_mode):
        return None, "a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    if st.st_size > limit:
        return None, f"{st.st_size:,} bytes (at most {limit:,})"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the two looks
            return None, "not a regular file"
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)
    if size > limit:
        return None, f"more than {limit:,} bytes"
    return b"".join(chunks), ""


def parse_python(code: str) -> tuple[ast.Module | None, str]:
    """``(tree, "")``, or ``(None, reason)`` for code that does not parse, exceeds the bounds, or is
    nested deeper than later passes (visitors recurse) can walk."""
    problem = text_problem(code)
    if problem:
        return None, problem
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return None, f"the code does not parse: line {exc.lineno}: {exc.msg}"
    except (RecursionError, MemoryError, ValueError):
        return None, "the code is nested too deeply to parse"
    depth = ast_depth(tree)
    if depth > MAX_AST_DEPTH:
        return None, f"the code nests {depth} levels deep (at most {MAX_AST_DEPTH})"
    return tree, ""


def json_depth(value: Any) -> int:
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def loads_json(text: str, max_chars: int = MAX_ANSWER_CHARS) -> tuple[Any, str]:
    """``(value, "")`` or ``(None, reason)``; never raises. Non-finite numbers (NaN, Infinity) are refused."""
    if len(text) > max_chars:
        return None, f"{len(text):,} characters of JSON (at most {max_chars:,})"
    if nesting_depth(text) > MAX_JSON_DEPTH * 2:
        return None, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"

    def _constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        value = json.loads(text, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at line {exc.lineno})"
    except (RecursionError, MemoryError):
        return None, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError as exc:
        return None, f"invalid JSON ({exc})"
    if json_depth(value) > MAX_JSON_DEPTH:
        return None, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    return value, ""
