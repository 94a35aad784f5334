"""The second shape set: the sizes a task defines at module level, varied so that a hard-coded size fails.

KernelBench tasks define their sizes as module-level integers (``batch_size``, ``dim``, ``M``, ``K``,
``in_features``, ``height`` ...) that ``get_inputs()`` and ``get_init_inputs()`` read when called. A
candidate that hard-codes one of them (a row length, an inner GEMM dimension) passes every check on
the shipped shapes; it fails when those sizes change. :func:`shape_plans` proposes, in order:

1. every size scaled to about 3/4 and made odd (not a multiple of 2, 32 or 128);
2. every size scaled to about 3/4 on a multiple of 8 that is not a multiple of 32 (models that need
   channels divisible by groups or heads);
3. ``batch_size`` alone.

The task file is executed again with the new values (so sizes derived from them at module level follow)
and the evaluation takes the first plan the reference model accepts. Every size only shrinks, so the
second set never needs more memory than the first. Integers that configure the operator rather than
size the data (below 8, or named kernel/stride/padding/dilation/groups/heads/layers ...) stay as
they are. Standard library only.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

#: names of module-level integers that configure the operator instead of sizing the data
STRUCTURAL = re.compile(r"kernel|stride|pad|dilation|group|head|layer|stage|ratio|scale|divisor|factor|"
                        r"axis|seed|iter|steps", re.IGNORECASE)
MIN_SIZE = 8  # integers below this are indices, kernel sizes, strides: never varied


@dataclass
class ShapePlan:
    """A set of module-level sizes to apply (``sizes``: name -> new value)."""

    description: str
    sizes: dict[str, int] = field(default_factory=dict)
    rebuild: bool = True  # construct the models again from the varied get_init_inputs()

    def task_module(self, path: str | Path, base: ModuleType) -> ModuleType:
        """The task executed again with the varied sizes, so that values derived from them at module
        level (``bias_shape = (out_channels, 1, 1)``) follow; ``base`` itself when nothing varies."""
        if not self.sizes:
            return base
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id in self.sizes:
                node.value = ast.copy_location(ast.Constant(self.sizes[node.targets[0].id]), node.value)
        module = ModuleType(f"{base.__name__}_alt")
        module.__file__ = str(path)
        exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 - the task, in the worker
        for name, value in self.sizes.items():  # sizes set by other means (a loop, a tuple assignment)
            if getattr(module, name, None) != value:
                setattr(module, name, value)
        return module


def task_sizes(task: ModuleType) -> dict[str, int]:
    """The module-level integers of a task that size its data (see :data:`STRUCTURAL`)."""
    out: dict[str, int] = {}
    for name, value in vars(task).items():
        if name.startswith("_") or type(value) is not int or value < MIN_SIZE:
            continue
        if name != "batch_size" and STRUCTURAL.search(name):
            continue
        out[name] = value
    return out


def odd_size(value: int) -> int:
    """About 3/4 of ``value``, odd (so not a multiple of 2, 32 or 128), at least 3."""
    new = max(3, value * 3 // 4)
    return new - 1 if new % 2 == 0 else new


def eight_size(value: int) -> int:
    """About 3/4 of ``value`` on a multiple of 8 that is not a multiple of 32 (at least 8)."""
    new = max(8, (value * 3 // 4) // 8 * 8)
    if new % 32 == 0:
        new -= 8
    return max(8, new)


def _describe(sizes: dict[str, int], original: dict[str, int]) -> str:
    return ", ".join(f"{k} {original[k]}->{v}" for k, v in sizes.items())


def shape_plans(task: ModuleType, policy: str = "vary_all", batch_scale: float = 0.5) -> list[ShapePlan]:
    """The second-shape-set plans to try, in order (empty when nothing can vary)."""
    if policy == "none":
        return []
    plans: list[ShapePlan] = []
    sizes = task_sizes(task)
    if policy == "vary_all" and sizes:
        for fn in (odd_size, eight_size):
            varied = {k: fn(v) for k, v in sizes.items() if fn(v) != v}
            if varied and all(p.sizes != varied for p in plans):
                plans.append(ShapePlan(_describe(varied, sizes), varied))
    batch = getattr(task, "batch_size", None)
    if type(batch) is int and batch >= 2:
        new = max(1, int(batch * batch_scale))
        if new != batch and all(p.sizes != {"batch_size": new} for p in plans):
            plans.append(ShapePlan(f"batch_size {batch}->{new}", {"batch_size": new}))
    return plans


__all__ = ["ShapePlan", "eight_size", "odd_size", "shape_plans", "task_sizes"]
