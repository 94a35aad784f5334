"""``launch_grid_blocks``: how many blocks a kernel's launches give, read statically from the host code and
the task's input shapes.

A deliberately partial reader (no preprocessor, no templates, no control flow): the C++ host function that
``ModelNew.forward`` calls gets its tensor parameters bound to the task's ``get_inputs`` shapes (through the
forward's arguments, else by position), then its straight-line integer declarations are evaluated in order
(``int rows = x.size(0);``, ``const int64_t n = x.numel();``, ``dim3 grid(N / T, M / T);``, with ``#define``
and ``constexpr`` integer constants of the file) and so is the first argument of every ``kernel<<<...>>>``.
A name assigned twice, a ternary, a call it does not know (``std::min``/``max`` and ceil-div helpers are
known) leaves that launch unknown, and any unknown launch leaves the field missing: it is a fact or nothing.
The field is the largest grid among the launches (a forward is underfilled only if every kernel is).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.feature_rules.scanner import Function, Source, scan, split_top_level
from kernelskill.taskfile import dotted_name

from .work import int_value, task_input_shapes

_INT_TYPE = (r"(?:const\s+|constexpr\s+|static\s+)*(?:unsigned\s+|signed\s+)?(?:auto|int|long\s+long|long|short|"
             r"size_t|int64_t|int32_t|uint32_t|uint64_t|unsigned|index_t)")
_DECL = re.compile(rf"(?:^|(?<=[;{{}}]))\s*{_INT_TYPE}\s+([^;]*?);", re.S)
_DIM3 = re.compile(r"(?:^|(?<=[;{}]))\s*(?:const\s+)?dim3\s+(\w+)\s*(?:[({](.*?)[)}]|=\s*dim3\s*[({](.*?)[)}])\s*;", re.S)
_ASSIGN = re.compile(r"(?:^|(?<=[;{})]))\s*(?:else\s+)?(\w+)\s*(?:[-+*/%|&^]|<<|>>)?=(?!=)|(\w+)\s*(?:\+\+|--)", re.S)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]+)$", re.M)
_CONST = re.compile(rf"(?:^|(?<=[;}}]))\s*{_INT_TYPE}\s+(\w+)\s*=\s*([^;{{}}]+);", re.S)
_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;()]*>)?\s*<<<(.*?)>>>", re.S)
_SUFFIX = re.compile(r"\b(\d+)(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)\b")
_CAST = re.compile(r"\(\s*(?:const\s+)?(?:unsigned\s+)?(?:int|long\s+long|long|int64_t|int32_t|size_t|uint32_t|"
                   r"uint64_t|unsigned)\s*\)")
_STATIC_CAST = re.compile(r"static_cast\s*<[^<>]*>")
_SIZE = re.compile(r"\b(\w+)\s*\.\s*(?:size\s*\(\s*(-?\d+)\s*\)|sizes\s*\(\s*\)\s*\[\s*(-?\d+)\s*\]|numel\s*\(\s*\)|"
                   r"dim\s*\(\s*\))")
_CALLS = {"std::min": "min", "std::max": "max", "min": "min", "max": "max", "at::ceil_div": "cdiv",
          "ceil_div": "cdiv", "cdiv": "cdiv", "CEIL_DIV": "cdiv", "DIV_UP": "cdiv", "div_up": "cdiv",
          "CDIV": "cdiv", "DIVUP": "cdiv", "ceildiv": "cdiv"}
_PY_PASSTHROUGH = {"contiguous", "float", "cuda", "detach", "clone", "to", "half", "bfloat16", "view", "reshape"}


@dataclass
class Launch:
    kernel: str
    host: str
    blocks: int | None
    why: str


@dataclass
class GridFacts:
    blocks: int | None = None  # the largest grid of the launches, when every one is known
    why: str = ""
    launches: list[Launch] = field(default_factory=list)


def _c_to_python(expr: str, shapes: dict[str, list[int]]) -> str | None:
    """A C integer expression as Python source (``/`` floor division on non-negative ints), or None."""
    def size(m: re.Match[str]) -> str:
        shape = shapes.get(m.group(1))
        if shape is None:
            return "__unknown__"
        text = m.group(0)
        if "numel" in text:
            return str(math.prod(shape))
        if "dim" in text and "size" not in text:
            return str(len(shape))
        idx = int(m.group(2) if m.group(2) is not None else m.group(3))
        return str(shape[idx]) if -len(shape) <= idx < len(shape) else "__unknown__"

    out = _SIZE.sub(size, expr)
    if "?" in out or "->" in out or "[" in out or "." in out.replace("...", ""):
        return None
    out = _STATIC_CAST.sub("", _CAST.sub(" ", out))
    out = _SUFFIX.sub(r"\1", out)
    for c_name, py_name in sorted(_CALLS.items(), key=lambda kv: -len(kv[0])):
        out = re.sub(rf"(?<![\w:]){re.escape(c_name)}\s*\(", f"{py_name}(", out)
    if "::" in out or "&&" in out or "||" in out:
        return None
    return out.replace("/", "//").strip()


def _value(expr: str, env: dict[str, int | None], shapes: dict[str, list[int]]) -> int | None:
    py = _c_to_python(expr, shapes)
    if not py:
        return None
    try:
        tree = ast.parse(py, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return None
    return int_value(tree, env, c_source=True)


def _file_constants(view: str) -> dict[str, int | None]:
    env: dict[str, int | None] = {}
    for m in _DEFINE.finditer(view):
        v = _value(m.group(2), env, {})
        if v is not None:
            env[m.group(1)] = v
    for m in _CONST.finditer(view):
        v = _value(m.group(2), env, {})
        env[m.group(1)] = v if m.group(1) not in env or env[m.group(1)] == v else None
    return env


def _host_env(fn: Function, view: str, base: dict[str, int | None], shapes: dict[str, list[int]]
              ) -> tuple[dict[str, int | None], dict[str, tuple[int | None, ...]]]:
    """Integer values and dim3 values the host body assigns once, in order (a second assignment: unknown)."""
    body = fn.body(view)
    env = dict(base)
    for p in fn.params:
        if p.name in env:
            env[p.name] = None  # a parameter shadows a file constant of its name
    dims: dict[str, tuple[int | None, ...]] = {}
    events: list[tuple[int, str, str, str]] = []  # (offset, kind, name, expression)
    for m in _DECL.finditer(body):
        offset = m.start(1)
        for part in split_top_level(m.group(1), ","):
            dm = re.match(r"\s*(\w+)\s*(?:=\s*(.+)|[({](.*)[)}])\s*$", part, re.S)
            if dm:
                events.append((offset, "int", dm.group(1), (dm.group(2) or dm.group(3) or "").strip()))
    for m in _DIM3.finditer(body):
        events.append((m.start(1), "dim3", m.group(1), m.group(2) if m.group(2) is not None else m.group(3)))
    for m in _ASSIGN.finditer(body):  # a plain assignment (no type in front): the name is assigned again
        name = m.group(1) or m.group(2)
        events.append((m.start(1) if m.group(1) else m.start(2), "reassign", name, ""))
    seen: set[str] = set()
    for _, kind, name, expr in sorted(events):
        if name in seen:  # assigned again (declared twice or reassigned): unknown from here on
            env[name] = None
            dims.pop(name, None)
            continue
        if kind == "reassign":
            continue
        seen.add(name)
        if kind == "int":
            env[name] = _value(expr, env, shapes)
        else:
            dims[name] = tuple(_value(a, env, shapes) for a in split_top_level(expr, ","))
    return env, dims


def _grid_blocks(arg: str, env: dict[str, int | None], dims: dict[str, tuple[int | None, ...]],
                 shapes: dict[str, list[int]]) -> int | None:
    arg = arg.strip()
    parts: tuple[int | None, ...]
    if arg in dims:
        parts = dims[arg]
    else:
        m = re.fullmatch(r"(?:dim3\s*)?[({](.*)[)}]", arg, re.S)
        if m and (arg.startswith(("dim3", "{"))):
            parts = tuple(_value(a, env, shapes) for a in split_top_level(m.group(1), ","))
        else:
            parts = (_value(arg, env, shapes),)
    if not parts or any(p is None for p in parts):
        return None
    n = math.prod(int(p) for p in parts if p is not None)
    return n if n > 0 else None


def _forward_bindings(src: Source, hosts: dict[str, Function], inputs: list[list[int]]
                      ) -> dict[str, list[list[int] | None]]:
    """Per host function the forward calls, the shape each of its arguments carries (None: not an input)."""
    tree = src.py_tree
    if tree is None:
        return {}
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    fwd = next((f for f in (cls.body if cls else []) if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
    if fwd is None:
        return {}
    params = [a.arg for a in fwd.args.args[1:]]
    out: dict[str, list[list[int] | None]] = {}
    for node in ast.walk(fwd):
        if not isinstance(node, ast.Call):
            continue
        name = (dotted_name(node.func) or "").split(".")[-1]
        if name not in hosts:
            continue
        shapes: list[list[int] | None] = []
        for a in node.args:
            while isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr in _PY_PASSTHROUGH:
                a = a.func.value
            idx = params.index(a.id) if isinstance(a, ast.Name) and a.id in params else None
            shapes.append(inputs[idx] if idx is not None and idx < len(inputs) else None)
        out.setdefault(name, shapes)
    return out


def launch_grid(source: str, task: str | Path) -> GridFacts:
    """The grids of the custom launches in ``source``'s host code, sized with ``task``'s input shapes."""
    inputs, how = task_input_shapes(task)
    if not inputs:
        return GridFacts(why=f"task input shapes unknown: {how}")
    src = scan(source)
    view = src.cuda
    hosts = {f.name: f for f in src.host_functions}
    kernels = {f.name for f in src.kernels}
    if not kernels:
        return GridFacts(why="no __global__ kernel in the source")
    consts = _file_constants(view)
    bound = _forward_bindings(src, hosts, inputs)
    facts = GridFacts()
    for host in hosts.values():
        body = host.body(view)
        launches = [m for m in _LAUNCH.finditer(body) if m.group(1) in kernels]
        if not launches:
            continue
        tensors = [p for p in host.params if "Tensor" in p.type]
        if host.name in bound:
            args = bound[host.name]
            shapes = {p.name: s for p, s in zip(host.params, args, strict=False) if s is not None}
        elif len(tensors) == len(inputs):
            shapes = {p.name: s for p, s in zip(tensors, inputs, strict=True)}
        else:
            shapes = {}
        env, dims = _host_env(host, view, consts, shapes)
        for m in launches:
            arg = split_top_level(m.group(2), ",")[0] if m.group(2).strip() else ""
            blocks = _grid_blocks(arg, env, dims, shapes) if arg else None
            why = (f"{m.group(1)}<<<{' '.join(arg.split())}, ...>>> in {host.name} = "
                   + (f"{blocks} blocks" if blocks is not None else "unknown"))
            facts.launches.append(Launch(kernel=m.group(1), host=host.name, blocks=blocks, why=why))
    if not facts.launches:
        return GridFacts(why="no kernel<<<...>>> launch in a host function")
    if any(x.blocks is None for x in facts.launches):
        facts.why = "; ".join(x.why for x in facts.launches)[:400]
        return facts
    facts.blocks = max(int(x.blocks) for x in facts.launches if x.blocks is not None)
    shown = ", ".join(f"input {s}" for s in inputs)
    facts.why = "; ".join(x.why for x in facts.launches)[:400] + f" (task {shown})"
    return facts


__all__ = ["GridFacts", "Launch", "launch_grid"]
