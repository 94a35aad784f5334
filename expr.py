"""The safe expression language of predicates and derived fields (docs/CONTRACTS.md, "Expressions").

An expression is parsed once with :mod:`ast` and compiled into a small tree of whitelisted nodes;
nothing is ever handed to Python's ``eval``. Evaluation is three-valued (Kleene): a symbol that is
missing from the environment is *unknown* (``None``), arithmetic and comparisons on an unknown give
unknown, ``False and unknown`` is False, ``True or unknown`` is True, ``defined(x)`` is never unknown.

    >>> compile_expr("dram_throughput_pct >= 80 and not has_reuse").evaluate({"has_reuse": False})
    >>> compile_expr("max(a, b) - c").evaluate({"a": 1, "b": 3, "c": 1})
    2
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kernelskill.errors import KernelskillError

Value = bool | int | float | str | None
Env = Mapping[str, Any]

FUNCTIONS = ("min", "max", "abs", "defined")

#: Bounds on one expression: its length and how deeply its syntax tree nests (``a + b + c`` nests one level
#: per operator). Real predicates are far inside both; the bounds keep a hostile skills file from driving
#: the compiler or the evaluator into Python's recursion limit.
MAX_LENGTH = 2000
MAX_DEPTH = 64


class ExprError(KernelskillError):
    """An expression outside the whitelist, or one that cannot be evaluated (types)."""


def _fail(expr: str, node: ast.AST | None, what: str) -> ExprError:
    col = getattr(node, "col_offset", None)
    where = f" (column {col + 1})" if col is not None else ""
    return ExprError(f"expression {expr!r}{where}: {what}")


# ------------------------------------------------------------------------------------------- nodes
class Node:
    def eval(self, env: Env) -> Value:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Const(Node):
    value: Value

    def eval(self, env: Env) -> Value:
        return self.value


@dataclass(frozen=True, slots=True)
class Name(Node):
    name: str

    def eval(self, env: Env) -> Value:
        return env.get(self.name)


@dataclass(frozen=True, slots=True)
class Defined(Node):
    name: str

    def eval(self, env: Env) -> Value:
        return env.get(self.name) is not None


def _truth(value: Value, expr: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise ExprError(f"expression {expr!r}: a string ({value!r}) used as a condition")
    return bool(value)


@dataclass(frozen=True, slots=True)
class And(Node):
    parts: tuple[Node, ...]
    expr: str

    def eval(self, env: Env) -> Value:
        unknown = False
        for part in self.parts:
            v = _truth(part.eval(env), self.expr)
            if v is False:
                return False
            if v is None:
                unknown = True
        return None if unknown else True


@dataclass(frozen=True, slots=True)
class Or(Node):
    parts: tuple[Node, ...]
    expr: str

    def eval(self, env: Env) -> Value:
        unknown = False
        for part in self.parts:
            v = _truth(part.eval(env), self.expr)
            if v is True:
                return True
            if v is None:
                unknown = True
        return None if unknown else False


@dataclass(frozen=True, slots=True)
class Not(Node):
    operand: Node
    expr: str

    def eval(self, env: Env) -> Value:
        v = _truth(self.operand.eval(env), self.expr)
        return None if v is None else not v


def _is_number(v: Value) -> bool:
    return isinstance(v, int | float)  # bool is an int: True + 1 == 2, as in Python


_ARITH: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


@dataclass(frozen=True, slots=True)
class Arith(Node):
    op: Callable[[Any, Any], Any]
    left: Node
    right: Node
    expr: str

    def eval(self, env: Env) -> Value:
        a, b = self.left.eval(env), self.right.eval(env)
        if a is None or b is None:
            return None
        if not (_is_number(a) and _is_number(b)):
            raise ExprError(f"expression {self.expr!r}: arithmetic on {a!r} and {b!r}")
        if self.op is operator.truediv and b == 0:
            return None  # undefined, not an error: the trace shows it as unknown
        return self.op(a, b)


@dataclass(frozen=True, slots=True)
class Neg(Node):
    operand: Node
    expr: str

    def eval(self, env: Env) -> Value:
        v = self.operand.eval(env)
        if v is None:
            return None
        if not _is_number(v):
            raise ExprError(f"expression {self.expr!r}: cannot negate {v!r}")
        return -v


_CMP: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_ORDERING = (operator.lt, operator.le, operator.gt, operator.ge)


def _compare(op: Callable[[Any, Any], bool], a: Value, b: Value, expr: str) -> bool | None:
    if a is None or b is None:
        return None
    if op in _ORDERING:
        if not (_is_number(a) and _is_number(b)) and not (isinstance(a, str) and isinstance(b, str)):
            raise ExprError(f"expression {expr!r}: cannot order {a!r} and {b!r}")
    elif _is_number(a) != _is_number(b):
        raise ExprError(f"expression {expr!r}: comparing {a!r} with {b!r} (different types)")
    return bool(op(a, b))


@dataclass(frozen=True, slots=True)
class Compare(Node):
    first: Node
    ops: tuple[Callable[[Any, Any], bool], ...]
    rest: tuple[Node, ...]
    expr: str

    def eval(self, env: Env) -> Value:
        left = self.first.eval(env)
        unknown = False
        for op, node in zip(self.ops, self.rest, strict=True):
            right = node.eval(env)
            v = _compare(op, left, right, self.expr)
            if v is False:
                return False
            if v is None:
                unknown = True
            left = right
        return None if unknown else True


@dataclass(frozen=True, slots=True)
class In(Node):
    item: Node
    options: tuple[Value, ...]
    negate: bool

    def eval(self, env: Env) -> Value:
        v = self.item.eval(env)
        if v is None:
            return None
        found = any(v == o and isinstance(v, str) == isinstance(o, str) for o in self.options)
        return found != self.negate


@dataclass(frozen=True, slots=True)
class Call(Node):
    fn: str
    args: tuple[Node, ...]
    expr: str

    def eval(self, env: Env) -> Value:
        values = [a.eval(env) for a in self.args]
        if any(v is None for v in values):
            return None
        if not all(_is_number(v) for v in values):
            raise ExprError(f"expression {self.expr!r}: {self.fn}() of non-numbers {values!r}")
        if self.fn == "abs":
            return abs(values[0])
        return min(values) if self.fn == "min" else max(values)


# ---------------------------------------------------------------------------------------- compiler
class _Compiler:
    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.names: dict[str, None] = {}

    def fail(self, node: ast.AST, what: str) -> ExprError:
        return _fail(self.expr, node, what)

    def literal(self, node: ast.AST) -> Value:
        if isinstance(node, ast.Constant) and isinstance(node.value, bool | int | float | str):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.literal(node.operand)
            if _is_number(inner) and not isinstance(inner, bool):
                return -inner
        raise self.fail(node, "only literals may appear in a list after 'in'")

    def build(self, node: ast.AST) -> Node:
        if isinstance(node, ast.Expression):
            return self.build(node.body)
        if isinstance(node, ast.Constant):
            if node.value is None or not isinstance(node.value, bool | int | float | str):
                raise self.fail(node, f"literal {node.value!r} is not allowed")
            return Const(node.value)
        if isinstance(node, ast.Name):
            if node.id in FUNCTIONS:
                raise self.fail(node, f"{node.id} must be called")
            self.names.setdefault(node.id, None)
            return Name(node.id)
        if isinstance(node, ast.BoolOp):
            parts = tuple(self.build(v) for v in node.values)
            return And(parts, self.expr) if isinstance(node.op, ast.And) else Or(parts, self.expr)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return Not(self.build(node.operand), self.expr)
            if isinstance(node.op, ast.USub):
                return Neg(self.build(node.operand), self.expr)
            if isinstance(node.op, ast.UAdd):
                return self.build(node.operand)
            raise self.fail(node, f"operator {type(node.op).__name__} is not allowed")
        if isinstance(node, ast.BinOp):
            op = _ARITH.get(type(node.op))
            if op is None:
                raise self.fail(node, f"operator {type(node.op).__name__} is not allowed (only + - * /)")
            return Arith(op, self.build(node.left), self.build(node.right), self.expr)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(node, f"{type(node).__name__} is not allowed")

    def compare(self, node: ast.Compare) -> Node:
        if len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
            target = node.comparators[0]
            if not isinstance(target, ast.List | ast.Tuple):
                raise self.fail(target, "'in' needs a list or tuple literal on the right")
            options = tuple(self.literal(e) for e in target.elts)
            return In(self.build(node.left), options, isinstance(node.ops[0], ast.NotIn))
        ops = []
        for op in node.ops:
            fn = _CMP.get(type(op))
            if fn is None:
                raise self.fail(node, f"comparison {type(op).__name__} is not allowed here")
            ops.append(fn)
        return Compare(self.build(node.left), tuple(ops), tuple(self.build(c) for c in node.comparators),
                       self.expr)

    def call(self, node: ast.Call) -> Node:
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise self.fail(node, f"calls other than {', '.join(FUNCTIONS)} are not allowed")
        if node.keywords:
            raise self.fail(node, "keyword arguments are not allowed")
        fn = node.func.id
        if fn == "defined":
            if len(node.args) != 1 or not isinstance(node.args[0], ast.Name):
                raise self.fail(node, "defined() takes exactly one symbol name")
            name = node.args[0].id
            self.names.setdefault(name, None)
            return Defined(name)
        if fn == "abs" and len(node.args) != 1:
            raise self.fail(node, "abs() takes exactly one argument")
        if fn in ("min", "max") and len(node.args) < 2:
            raise self.fail(node, f"{fn}() takes two or more arguments")
        return Call(fn, tuple(self.build(a) for a in node.args), self.expr)


@dataclass(frozen=True)
class Expression:
    """A compiled expression: ``evaluate(env)`` and the symbols it names (``names``)."""

    source: str
    root: Node
    names: tuple[str, ...]

    def evaluate(self, env: Env) -> Value:
        return self.root.eval(env)

    def inputs(self, env: Env) -> dict[str, Value]:
        """The values of the symbols this expression names (None = unknown), for the trace."""
        return {n: env.get(n) for n in self.names}


def ast_depth(tree: ast.AST) -> int:
    """How deeply a syntax tree nests, computed without recursion (so a hostile tree cannot overflow it)."""
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


@functools.lru_cache(maxsize=4096)
def compile_expr(source: str) -> Expression:
    """Parse and check ``source``; raises :class:`ExprError` naming the offending construct."""
    if not isinstance(source, str) or not source.strip():
        raise ExprError(f"expression {source!r}: empty")
    if len(source) > MAX_LENGTH:
        raise ExprError(f"expression {source[:40]!r}...: longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"expression {source!r}: syntax error at column {exc.offset or 0}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression {source[:40]!r}...: nested too deeply to parse") from None
    depth = ast_depth(tree)
    if depth > MAX_DEPTH:
        raise ExprError(f"expression {source[:40]!r}{'...' if len(source) > 40 else ''}: nests {depth} levels "
                        f"deep (at most {MAX_DEPTH}; split it into named predicates)")
    comp = _Compiler(source)
    root = comp.build(tree)
    return Expression(source, root, tuple(comp.names))


def evaluate(source: str, env: Env) -> Value:
    """Compile (cached) and evaluate in one step."""
    return compile_expr(source).evaluate(env)


def symbols(source: str) -> tuple[str, ...]:
    """The symbol names an expression refers to (for lint and dependency order)."""
    return compile_expr(source).names
