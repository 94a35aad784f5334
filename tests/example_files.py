"""AST helpers shared by the worked-example tests (``test_kb_examples_b1.py``, ``_b2.py``).

Nothing here builds or imports an example: the files are parsed with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from kernelskill.kb.schema import Method

SKILLS = Path(__file__).resolve().parents[1] / "kb" / "skills"
CONTRACT_TAGS = {"caching", "vectorization", "precision", "library", "tensor_core", "async_copy", "hopper_only"}


def load_method(mid: str) -> Method:
    data = yaml.safe_load((SKILLS / "methods" / f"{mid}.yaml").read_text())
    assert list(data) == ["methods"], f"{mid}: only a 'methods' key expected"
    assert len(data["methods"]) == 1
    return Method(**data["methods"][0])


def module_strings(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def top_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def init_params(path: Path, cls: str) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return [a.arg for a in item.args.args[1:]]
    raise AssertionError(f"{path}: {cls}.__init__ not found")


def load_inline_kwargs(path: Path) -> dict[str, ast.expr]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "load_inline":
            return {kw.arg: kw.value for kw in node.keywords if kw.arg}
    return {}
