"""The safe expression evaluator: whitelist, three-valued logic, types."""

from __future__ import annotations

import pytest

from kernelskill.errors import KernelskillError
from kernelskill.expr import ExprError, compile_expr, evaluate, symbols


@pytest.mark.parametrize(
    ("expr", "env", "value"),
    [
        ("dram_throughput_pct >= 80", {"dram_throughput_pct": 80.0}, True),
        ("dram_throughput_pct >= 80", {"dram_throughput_pct": 79.9}, False),
        ("dram_throughput_pct >= 80", {}, None),
        # Kleene and/or/not
        ("a >= 1 and b", {"b": False}, False),
        ("a >= 1 and b", {"b": True}, None),
        ("a >= 1 or b", {"b": True}, True),
        ("a >= 1 or b", {"b": False}, None),
        ("not a", {}, None),
        ("not a", {"a": False}, True),
        # defined() is never unknown
        ("defined(x)", {}, False),
        ("defined(x)", {"x": 0}, True),
        ("not defined(task_dtype) or task_dtype == 'fp32'", {}, True),
        ("not defined(task_dtype) or task_dtype == 'fp32'", {"task_dtype": "bf16"}, False),
        # arithmetic and functions
        ("100 * d / max(1, d + u)", {"d": 5, "u": 95}, 5.0),
        ("max(a, b, c)", {"a": 1, "b": 7.5, "c": 3}, 7.5),
        ("max(a, b, c)", {"a": 1, "c": 3}, None),
        ("min(a, b) - abs(c)", {"a": 2, "b": 3, "c": -1}, 1),
        ("-a + 3", {"a": 1}, 2),
        ("a / b", {"a": 1, "b": 0}, None),
        # chains, in, equality with bools and strings
        ("0 <= x < 60", {"x": 59.99}, True),
        ("0 <= x < 60", {"x": 60}, False),
        ("task_dtype in ['fp16', 'bf16', 'mixed']", {"task_dtype": "bf16"}, True),
        ("task_dtype not in ('fp16', 'bf16')", {"task_dtype": "fp32"}, True),
        ("task_dtype in ['fp16']", {}, None),
        ("kernel_structure_id in [1, 4]", {"kernel_structure_id": 4}, True),
        ("library_calls_allowed == False", {"library_calls_allowed": False}, True),
        ("library_calls_allowed == False", {}, None),
        ("kernel_structure_id == 3", {"kernel_structure_id": 3}, True),
    ],
)
def test_values(expr: str, env: dict, value: object) -> None:
    assert evaluate(expr, env) == value
    if value is not None:
        assert type(evaluate(expr, env)) is type(value)


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("__import__('os').system('true')", "not allowed"),
        ("a.b", "Attribute is not allowed"),
        ("a[0]", "Subscript is not allowed"),
        ("(lambda: 1)()", "not allowed"),
        ("a ** 2", "Pow is not allowed"),
        ("a % 2", "Mod is not allowed"),
        ("x in y", "list or tuple literal"),
        ("x in [y]", "only literals"),
        ("open('f')", "calls other than"),
        ("max(a)", "two or more"),
        ("defined(a + 1)", "one symbol name"),
        ("max(a, key=b)", "keyword"),
        ("[1, 2]", "List is not allowed"),
        ("a if b else c", "IfExp is not allowed"),
        ("a >=", "syntax error"),
        ("", "empty"),
        ("max", "must be called"),
        ("None", "literal None"),
    ],
)
def test_rejected(expr: str, fragment: str) -> None:
    with pytest.raises(ExprError) as err:
        compile_expr(expr)
    assert fragment in str(err.value)
    assert isinstance(err.value, KernelskillError)
    assert repr(expr) in str(err.value)


def test_type_errors_name_the_expression() -> None:
    with pytest.raises(ExprError, match="cannot order"):
        evaluate("task_dtype > 3", {"task_dtype": "fp32"})
    with pytest.raises(ExprError, match="different types"):
        evaluate("task_dtype == 3", {"task_dtype": "fp32"})
    with pytest.raises(ExprError, match="arithmetic"):
        evaluate("task_dtype + 1", {"task_dtype": "fp32"})
    with pytest.raises(ExprError, match="as a condition"):
        evaluate("task_dtype and True", {"task_dtype": "fp32"})


def test_symbols_and_inputs() -> None:
    assert symbols("100 * d / max(1, d + u) >= 5 and defined(z)") == ("d", "u", "z")
    expr = compile_expr("a >= b")
    assert expr.inputs({"a": 1}) == {"a": 1, "b": None}


def test_compiled_once() -> None:
    assert compile_expr("x < 1") is compile_expr("x < 1")
