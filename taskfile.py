"""The one reader of KernelBench task files, by static analysis: a task is parsed with :mod:`ast`, never
imported here (importing it would import torch and may run anything).

Used by the query (what the reference computes), the loop (is this a task at all) and the harness (which
module-level sizes a second shape set may vary). Standard library only: a leaf module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.errors import KernelskillError

_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32"}
_GLUE = {"contiguous", "view", "reshape", "size", "dim", "unsqueeze", "squeeze", "permute", "transpose",
         "to", "cuda", "cpu", "clone", "detach", "float", "flatten", "expand", "numel", "t"}


@dataclass
class TaskInfo:
    path: str
    ops: list[str] = field(default_factory=list)  # torch ops / modules the reference forward uses
    dtype: str | None = None
    shapes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = []
        if self.ops:
            parts.append("ops: " + ", ".join(self.ops))
        if self.dtype:
            parts.append(f"dtype {self.dtype}")
        if self.shapes:
            parts.append("inputs " + "; ".join(self.shapes[:4]))
        return "; ".join(parts)


def dotted_name(node: ast.AST) -> str | None:
    """``torch.nn.functional.softmax`` for the attribute chain of a call, None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def parse_task(path: Path) -> tuple[str, ast.Module]:
    """The task's source and syntax tree; a one-line error when it cannot be read or parsed."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelskillError(f"{path}: cannot read the task: {exc}") from exc
    try:
        return source, ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise KernelskillError(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from exc
    except (RecursionError, MemoryError, ValueError) as exc:
        raise KernelskillError(f"{path}: the task cannot be parsed ({type(exc).__name__})") from exc


def validate_task(path: Path) -> str:
    """The task's source, after checking (without running it) that it is a KernelBench task."""
    if not path.is_file():
        raise KernelskillError(f"{path}: task file not found")
    source, tree = parse_task(path)
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    missing = [n for n in ("Model", "get_inputs") if n not in names]
    if missing:
        raise KernelskillError(f"{path}: not a KernelBench task: no top-level {' or '.join(missing)}")
    return source


def module_int_sizes(source: str) -> dict[str, int]:
    """Module-level integer constants of a task (``batch_size = 16``, ``dim = 16384``): the sizes a second
    shape set varies."""
    out: dict[str, int] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and type(node.value.value) is int:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def read_task(path: str | Path) -> TaskInfo:
    """Parse a KernelBench task: ops of ``Model.forward`` (and modules built in ``__init__``), dtype and
    input shapes from ``get_inputs``."""
    p = Path(path)
    source, tree = parse_task(p)
    info = TaskInfo(path=str(p))
    ops: dict[str, None] = {}
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for fn in node.body:
                if not isinstance(fn, ast.FunctionDef):
                    continue
                for sub in ast.walk(fn):
                    if fn.name == "__init__" and isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                        name = dotted_name(sub.value.func) or ""
                        for t in sub.targets:
                            if isinstance(t, ast.Attribute) and name.split(".")[-1][:1].isupper():
                                modules[t.attr] = name.split(".")[-1]
                    if fn.name == "forward" and isinstance(sub, ast.Call):
                        name = dotted_name(sub.func) or ""
                        short = name.split(".")[-1]
                        if name.startswith("self.") and short in modules:
                            ops.setdefault(f"nn.{modules[short]}", None)
                        elif short and short not in _GLUE and not name.startswith("self."):
                            ops.setdefault(name.replace("torch.nn.functional.", "F.").replace("torch.", ""), None)
                        elif short in ("matmul", "mm", "bmm"):
                            ops.setdefault(short, None)
                    if fn.name == "forward" and isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
                        ops.setdefault("matmul", None)
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            seg = ast.get_source_segment(source, node) or ""
            m = re.search(r"dtype\s*=\s*torch\.(\w+)", seg) or re.search(r"\.(half|bfloat16)\(\)", seg)
            info.dtype = _DTYPES.get(m.group(1), m.group(1)) if m else "fp32"
            for call in re.findall(r"torch\.(?:rand|randn|ones|zeros|empty)\(([^)]*)\)", seg):
                info.shapes.append(call.strip())
    info.ops = list(ops)
    return info


