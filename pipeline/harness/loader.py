"""Load KernelBench-format tasks and candidates as Python modules.

A task file defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()`` and may
define ``get_inputs_alt()`` (a second shape set). A candidate is a Python file defining
``class ModelNew`` (``load_inline`` CUDA, the fast path of FASTPATH.md, or Triton), or a ``.cu`` file
whose host function ``forward`` takes the task's inputs in order.

Candidates are loaded only inside a worker process, never in the parent.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError

from .isolation import deny_unix_sockets

TASK_NAMES = ("Model", "get_inputs", "get_init_inputs")


@dataclass
class TaskSpec:
    """What static inspection of a task file found (no code is run)."""

    path: Path
    has_alt_inputs: bool
    batch_size: int | None
    source_hash: str


def read_source(path: str | Path, what: str) -> tuple[Path, str]:
    p = Path(path)
    if not p.is_file():
        raise KernelskillError(f"{p}: {what} file not found")
    try:
        return p, p.read_text()
    except UnicodeDecodeError as exc:
        raise KernelskillError(f"{p}: {what} file is not UTF-8 text ({exc})") from exc


def inspect_task(path: str | Path) -> TaskSpec:
    """Check that a task file parses and defines ``Model``, ``get_inputs`` and ``get_init_inputs``."""
    p, text = read_source(path, "task")
    try:
        tree = ast.parse(text, filename=str(p))
    except SyntaxError as exc:
        raise KernelskillError(f"{p}:{exc.lineno}: task does not parse: {exc.msg}") from exc
    defined: set[str] = set()
    batch: int | None = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defined.add(target.id)
                    if (target.id == "batch_size" and isinstance(node.value, ast.Constant)
                            and isinstance(node.value.value, int)):
                        batch = node.value.value
    missing = [n for n in TASK_NAMES if n not in defined]
    if missing:
        raise KernelskillError(f"{p}:1: task must define {', '.join(missing)} (KernelBench format)")
    return TaskSpec(path=p, has_alt_inputs="get_inputs_alt" in defined, batch_size=batch,
                    source_hash=hashlib.sha256(text.encode()).hexdigest()[:16])


def inspect_candidate(path: str | Path) -> tuple[Path, str, str]:
    """Return (path, source, kind) where kind is ``python`` or ``cu``; syntax errors raise."""
    p, text = read_source(path, "candidate")
    if p.suffix in (".cu", ".cuh"):
        return p, text, "cu"
    try:
        tree = ast.parse(text, filename=str(p))
    except SyntaxError as exc:
        raise KernelskillError(f"{p}:{exc.lineno}: candidate does not parse: {exc.msg}") from exc
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree)) and \
            "ModelNew" not in text:
        raise KernelskillError(f"{p}:1: candidate must define class ModelNew")
    return p, text, "python"


def load_module(path: str | Path, name: str) -> types.ModuleType:
    """Execute a Python file as a fresh module named ``name`` (registered in sys.modules)."""
    p = Path(path).resolve()
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise ImportError(f"cannot load {p}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_task(path: str | Path, name: str = "ks_task") -> types.ModuleType:
    module = load_module(path, name)
    for attr in TASK_NAMES:
        if not hasattr(module, attr):
            raise KernelskillError(f"{path}:1: task must define {attr}")
    return module


_FORWARD_RE = re.compile(r"(?:torch::Tensor|at::Tensor|std::vector<\s*(?:torch|at)::Tensor\s*>)\s+forward\s*"
                         r"\(([^)]*)\)", re.S)


def cu_forward_declaration(source: str) -> str:
    """``torch::Tensor forward(...);`` declared from a ``.cu`` candidate's host function."""
    m = _FORWARD_RE.search(source)
    if not m:
        raise KernelskillError("candidate .cu must define a host function `torch::Tensor forward(...)`")
    head = m.group(0)
    return head[: head.index("forward")] + "forward(" + m.group(1) + ");"


#: whether the Unix-socket filter is on in this worker (set when the first candidate is imported)
SOCKET_FILTER: dict[str, str] = {}


def load_candidate(path: str | Path, kind: str, name: str = "ks_candidate") -> Any:
    """Import the candidate and return its ``ModelNew`` class. First, for every thread of this worker,
    ``socket(AF_UNIX)`` is refused (:func:`.isolation.deny_unix_sockets`): CUDA is up by now."""
    if "unix_sockets" not in SOCKET_FILTER:
        SOCKET_FILTER["unix_sockets"] = deny_unix_sockets()
    if kind == "python":
        module = load_module(path, name)
        if not hasattr(module, "ModelNew"):
            raise KernelskillError(f"{path}:1: candidate defines no ModelNew")
        return module.ModelNew
    source = Path(path).read_text()
    import torch
    from torch.utils import cpp_extension

    if "PYBIND11_MODULE" in source:
        ext = cpp_extension.load(name=f"ks_cu_{hashlib.sha256(source.encode()).hexdigest()[:12]}",
                                 sources=[str(path)], verbose=False)
    else:
        ext = cpp_extension.load_inline(
            name=f"ks_cu_{hashlib.sha256(source.encode()).hexdigest()[:12]}",
            cpp_sources=[cu_forward_declaration(source)], cuda_sources=[source], functions=["forward"],
            verbose=False)

    class ModelNew(torch.nn.Module):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()

        def forward(self, *inputs: Any) -> Any:
            return ext.forward(*inputs)

    return ModelNew
