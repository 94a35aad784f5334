"""The small expression language of rules.yaml: names, and/or/not, comparisons, any/all/count."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from typing import Any

_ALLOWED_CALLS = {"any", "all", "count"}


class RuleSyntaxError(ValueError):
    pass


def compile_rule(text: str, where: str) -> ast.expr:
    try:
        tree = ast.parse(str(text), mode="eval").body
    except SyntaxError as exc:
        raise RuleSyntaxError(f"{where}: cannot parse {text!r}: {exc.msg}") from exc
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _ALLOWED_CALLS and len(node.args) == 1
                    and isinstance(node.args[0], ast.Name)):
                raise RuleSyntaxError(f"{where}: only any(fact), all(fact), count(fact) may be called")
        elif not isinstance(node, (ast.BoolOp, ast.UnaryOp, ast.Compare, ast.Name, ast.Constant, ast.And, ast.Or,
                                   ast.Not, ast.Load, ast.cmpop)):
            raise RuleSyntaxError(f"{where}: {type(node).__name__} is not allowed in {text!r}")
    return tree


@functools.lru_cache(maxsize=2048)
def names_in(tree: ast.expr) -> frozenset[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in _ALLOWED_CALLS:
            out.add(node.id)
    return frozenset(out)


def evaluate_rule(tree: ast.expr, lookup: Callable[[str], Any], agg: Callable[[str, str], Any] | None = None) -> Any:
    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return lookup(node.id)
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                return all(ev(v) for v in node.values)
            return any(ev(v) for v in node.values)
        if isinstance(node, ast.UnaryOp):
            return not ev(node.operand)
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = ev(right_node)
                ok = {ast.Eq: left == right, ast.NotEq: left != right, ast.Lt: left < right, ast.LtE: left <= right,
                      ast.Gt: left > right, ast.GtE: left >= right}[type(op)]
                if not ok:
                    return False
                left = right
            return True
        if isinstance(node, ast.Call):
            assert agg is not None, "any/all/count need a forward scope"
            return agg(node.func.id, node.args[0].id)
        raise RuleSyntaxError(f"unsupported node {type(node).__name__}")

    return ev(tree)
