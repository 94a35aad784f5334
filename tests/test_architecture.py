"""The package's shape, checked: imports only go downhill and no two modules import each other.

Every ``import`` and ``from ... import`` of a first-party module is read with :mod:`ast`, including imports
inside functions (an import hidden in a function is still a dependency). A new cycle, or an import from a
lower room into a higher one, fails here with the offending edge named.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"tests", "benchmarks", "examples", "scripts", "build", "dist"}

#: room -> the rooms it may import. Leaves first; a room may always import itself.
LEAVES = {"errors", "protocols", "expr", "taskfile", "yaml_load", "atomic_file"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "protocols": {"errors"},
    "expr": {"errors"},
    "taskfile": {"errors"},
    "yaml_load": set(),
    "atomic_file": set(),
    "config": {"errors", "protocols"},
    "kb": LEAVES | {"config"},
    "feature_rules": LEAVES | {"config", "kb"},
    "retrieval": LEAVES | {"config", "kb", "feature_rules"},
    "pipeline.harness": {"errors", "protocols", "taskfile", "atomic_file"},
    "pipeline.runs": LEAVES | {"pipeline.harness"},
    "pipeline.loop": LEAVES | {"config", "kb", "feature_rules", "retrieval", "pipeline.harness", "pipeline.runs"},
    "pipeline.bench": LEAVES | {"config", "kb", "feature_rules", "retrieval", "pipeline.harness", "pipeline.runs",
                                "pipeline.loop"},
    # front ends: the CLI and the MCP server call the library; the MCP server may reuse the CLI's renderers
    "commands": LEAVES | {"config", "kb", "feature_rules", "retrieval", "pipeline", "pipeline.harness",
                          "pipeline.runs", "pipeline.loop", "pipeline.bench", "mcp_server", "cli", "root"},
    "mcp_server": LEAVES | {"config", "kb", "feature_rules", "retrieval", "pipeline", "pipeline.harness",
                            "pipeline.runs", "pipeline.loop", "pipeline.bench", "commands", "root"},
    "cli": {"commands", "root"},
    "root": {"retrieval"},  # kernelskill/__init__.py: the lazy ``kernelskill.query``
    "pipeline": set(),
}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP or rel.parts[0].startswith(".") or "skills" in rel.parts or "venv" in rel.parts:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(["kernelskill", *parts])] = path
    return mods


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    if parts[1] == "__main__":
        return "cli"
    if parts[1] == "pipeline":
        return f"pipeline.{parts[2]}" if len(parts) > 2 else "pipeline"
    return parts[1]


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != "kernelskill":
                    continue
                # ``from pkg import submodule`` depends on the submodule; other names on ``pkg`` itself
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                targets = subs + ([target] if len(subs) < len(node.names) else [])
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "kernelskill"]
            for target in targets:
                while target not in mods and "." in target:
                    target = target.rpartition(".")[0]
                if target in mods and target != name:
                    edges[name].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_imports_only_go_downhill() -> None:
    wrong = []
    for source, targets in sorted(_graph().items()):
        a = _room(source)
        for target in sorted(targets):
            b = _room(target)
            if a != b and b not in ALLOWED.get(a, set()):
                wrong.append(f"{source} -> {target} ({a} may not import {b})")
    assert wrong == []


def test_every_room_is_known() -> None:
    """A new top-level room must be placed in the layering above before it can import anything."""
    rooms = {_room(m) for m in _modules()}
    assert rooms - set(ALLOWED) == set()


def test_the_checker_sees_a_cycle_and_a_wrong_way_import() -> None:
    edges = {"kernelskill.kb.a": {"kernelskill.kb.b"}, "kernelskill.kb.b": {"kernelskill.kb.a"}}
    assert _cycles(edges) == [["kernelskill.kb.a", "kernelskill.kb.b"]]
    assert "retrieval" not in ALLOWED[_room("kernelskill.kb.lint")]
