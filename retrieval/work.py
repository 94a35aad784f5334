"""The work of a task's forward, estimated statically: FLOPs of its matrix products and the fewest bytes
any kernel must move (each input read once, the output written once).

The task file is parsed with :mod:`ast`, never imported: ``get_inputs`` tensors are sized from their
literal dimensions (``1 << 20``, ``2 ** 12`` and products included) and the module-level integer
constants, ``nn.Linear`` from its constructor arguments.
What cannot be sized statically (a convolution's output, data-dependent shapes) is left unknown and says so.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.taskfile import dotted_name, parse_task

_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8}
_MAKERS = {"rand", "randn", "ones", "zeros", "empty", "randint", "full"}
_GEMM_CALLS = {"matmul", "mm", "bmm"}


@dataclass
class Work:
    flops: float | None = None
    bytes: float | None = None
    inputs: list[list[int]] = field(default_factory=list)
    how: str = ""


def int_value(node: ast.AST, names: Mapping[str, int | None], *, c_source: bool = False) -> int | None:
    """The value of an integer expression built from literals and ``names`` (None: not a known integer):
    ``+ - *``, ``//``, shifts and bounded powers, unary minus. With ``c_source`` (an expression translated
    from C host code by :mod:`.launch_grid`) also ``%`` and ``min``/``max``/``cdiv`` calls, and a division
    only of non-negative operands, where C's truncation and Python's floor agree."""
    if isinstance(node, ast.Expression):
        return int_value(node.body, names, c_source=c_source)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = int_value(node.operand, names, c_source=c_source)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = int_value(node.left, names, c_source=c_source), int_value(node.right, names, c_source=c_source)
        if a is None or b is None:
            return None
        op = node.op
        if isinstance(op, ast.FloorDiv | ast.Mod) and (b == 0 or (c_source and (a < 0 or b < 0))):
            return None
        ops = {ast.Mult: lambda: a * b, ast.Add: lambda: a + b, ast.Sub: lambda: a - b,
               ast.FloorDiv: lambda: a // b,
               ast.LShift: lambda: a << b if 0 <= b <= 62 else None,
               ast.RShift: lambda: a >> b if b >= 0 else None,
               ast.Pow: lambda: a ** b if 0 <= b <= 62 and abs(a) <= 1 << 20 else None}
        if c_source:
            ops[ast.Mod] = lambda: a % b
        f = ops.get(type(op))
        return f() if f else None
    if c_source and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [int_value(a, names, c_source=True) for a in node.args]
        if not args or any(a is None for a in args):
            return None
        vals = [int(a) for a in args if a is not None]
        if node.func.id in ("min", "max") and len(vals) >= 2:
            return min(vals) if node.func.id == "min" else max(vals)
        if node.func.id == "cdiv" and len(vals) == 2 and vals[1] > 0 and vals[0] >= 0:
            return -(-vals[0] // vals[1])
    return None


def _consts(tree: ast.Module) -> dict[str, int]:
    """Module-level integer constants, tuple assignments (``BATCH, WIDTH = 4096, 4096``) and products of
    earlier ones (``N = 4 * 1024``) included."""
    out: dict[str, int] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                v = int_value(node.value, out)
                if v is not None:
                    out[target.id] = v
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    and len(target.elts) == len(node.value.elts):
                for t, e in zip(target.elts, node.value.elts, strict=True):
                    v = int_value(e, out)
                    if isinstance(t, ast.Name) and v is not None:
                        out[t.id] = v
    return out


def _shape(call: ast.Call, consts: dict[str, int]) -> list[int] | None:
    args = call.args
    if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
        args = list(args[0].elts)
    dims = [int_value(a, consts) for a in args]
    return None if not dims or any(d is None for d in dims) else [int(d) for d in dims if d is not None]


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _inputs(tree: ast.Module, consts: dict[str, int]) -> list[list[int]] | None:
    fn = _function(tree, "get_inputs")
    if fn is None:
        return None
    shapes = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and (dotted_name(node.func) or "").split(".")[-1] in _MAKERS:
            s = _shape(node, consts)
            if s is None:
                return None
            shapes.append(s)
    return shapes


def _init_values(tree: ast.Module, consts: dict[str, int]) -> list[int | None]:
    fn = _function(tree, "get_init_inputs")
    ret = next((n for n in ast.walk(fn) if isinstance(n, ast.Return)), None) if fn else None
    if ret is None or not isinstance(ret.value, ast.List | ast.Tuple):
        return []
    return [int_value(e, consts) for e in ret.value.elts]


def _linears(tree: ast.Module, consts: dict[str, int]) -> list[tuple[int, int]]:
    """(in, out) of every nn.Linear Model.__init__ builds, its arguments resolved through the constructor's
    parameters (bound to get_init_inputs by position, else their defaults) and the module constants."""
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    init = next((f for f in (model.body if model else []) if isinstance(f, ast.FunctionDef) and f.name == "__init__"),
                None)
    if init is None:
        return []
    scope = dict(consts)
    params = [a.arg for a in init.args.args[1:]]
    defaults = init.args.defaults
    for name, d in zip(params[len(params) - len(defaults):], defaults, strict=True):
        v = int_value(d, consts)
        if v is not None:
            scope[name] = v
    for name, v in zip(params, _init_values(tree, consts), strict=False):
        if v is not None:
            scope[name] = v
    out = []
    for node in ast.walk(init):
        if isinstance(node, ast.Call) and (dotted_name(node.func) or "").split(".")[-1] == "Linear":
            dims = [int_value(a, scope) for a in node.args[:2]]
            if len(dims) == 2 and None not in dims:
                out.append((int(dims[0]), int(dims[1])))  # type: ignore[arg-type]
    return out


_UNSIZED = "get_inputs has tensors whose sizes are not literal or module constants"


def task_input_shapes(task: str | Path) -> tuple[list[list[int]], str]:
    """The shapes of the tensors ``get_inputs`` makes (empty, with why, when they cannot all be sized)."""
    _, tree = parse_task(Path(task))
    shapes = _inputs(tree, _consts(tree))
    return (shapes, "") if shapes else ([], _UNSIZED)


def estimate_work(task: str | Path, dtype: str | None = "fp32", op: str | None = None) -> Work:
    """FLOPs and minimum bytes of one forward of ``task`` (unknown parts stay None, ``how`` says why);
    ``op`` ``reduction``: the output is small next to the input and is not counted."""
    _, tree = parse_task(Path(task))
    consts = _consts(tree)
    size = _BYTES.get(dtype or "fp32", 4)
    shapes = _inputs(tree, consts)
    if not shapes:
        return Work(how=_UNSIZED)
    in_bytes = sum(math.prod(s) for s in shapes) * size
    calls = {(dotted_name(n.func) or "").split(".")[-1] for n in ast.walk(tree) if isinstance(n, ast.Call)}
    matmul_op = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) for n in ast.walk(tree))
    linears = _linears(tree, consts)
    if linears and shapes:
        rows = math.prod(shapes[0][:-1])
        flops = sum(2.0 * rows * i * o for i, o in linears)
        w_bytes = sum(i * o + o for i, o in linears) * size
        out_bytes = rows * linears[-1][1] * size
        return Work(flops=flops, bytes=in_bytes + w_bytes + out_bytes, inputs=shapes,
                    how=f"nn.Linear {linears} on {rows} rows")
    if (calls & _GEMM_CALLS or matmul_op) and len(shapes) >= 2:
        a, b = shapes[0], shapes[1]
        if len(a) >= 2 and len(b) >= 2 and a[-1] == b[-2]:
            m, k, n = a[-2], a[-1], b[-1]
            batch = math.prod(a[:-2]) if len(a) > 2 else 1
            return Work(flops=2.0 * batch * m * k * n, bytes=in_bytes + batch * m * n * size, inputs=shapes,
                        how=f"matmul of {a} and {b}")
        if len(a) == 2 and len(b) == 1 and a[-1] == b[0]:  # matrix-vector
            return Work(flops=2.0 * a[0] * a[1], bytes=in_bytes + a[0] * size, inputs=shapes,
                        how=f"matrix-vector product of {a} and {b}")
        return Work(bytes=None, inputs=shapes, how=f"a matrix product whose operand shapes {a}, {b} do not chain")
    if calls & {"conv1d", "conv2d", "conv3d", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "ConvTranspose3d"}:
        return Work(inputs=shapes, how="a convolution: its FLOPs need the output size (not estimated statically)")
    if op == "reduction":
        return Work(bytes=in_bytes, inputs=shapes, how="each input read once (a reduction's output is small)")
    # bandwidth-bound work: read every input once, write an output the size of the first input
    return Work(flops=None, bytes=in_bytes + math.prod(shapes[0]) * size, inputs=shapes,
                how="each input read once and an output the size of the first input written once")
