"""Worked examples as the prompts show them: what the example computes (its label), how close it is to the
task being optimised, and its before/after code.

A method's worked example is a KernelBench-format task with a ``before.py`` and an ``after.py``; its module
docstring says what it computes and at which shape ("fp32 GEMM, C = A @ B, M = N = K = 2048"), which is the
label a measured speedup is quoted with. Closeness is the overlap of the operations the two tasks' ``Model``
calls (GEMM, convolution, softmax, normalisation, reduction, elementwise, ...) as the task reader
(``kernelskill.taskfile``, static analysis) finds them: nothing here imports or runs a task.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.taskfile import read_task

log = logging.getLogger(__name__)

#: call or module name -> the operation family it belongs to (names not listed count as themselves only)
FAMILIES: dict[str, str] = {
    **dict.fromkeys(("matmul", "mm", "bmm", "addmm", "baddbmm", "linear", "einsum", "matmul_op", "bilinear"),
                    "gemm"),
    **dict.fromkeys(("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                     "convtranspose1d", "convtranspose2d", "convtranspose3d"), "conv"),
    **dict.fromkeys(("softmax", "log_softmax", "logsoftmax", "scaled_dot_product_attention",
                     "multiheadattention"), "softmax"),
    **dict.fromkeys(("layer_norm", "layernorm", "group_norm", "groupnorm", "batch_norm", "batchnorm1d",
                     "batchnorm2d", "batchnorm3d", "instance_norm", "instancenorm2d", "rms_norm", "rmsnorm",
                     "normalize"), "norm"),
    **dict.fromkeys(("sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "var", "std",
                     "norm", "logsumexp", "cumsum", "cumprod", "histc", "bincount"), "reduction"),
    **dict.fromkeys(("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                     "maxpool1d", "maxpool2d", "maxpool3d", "avgpool1d", "avgpool2d", "avgpool3d",
                     "adaptive_avg_pool2d", "adaptiveavgpool2d"), "pool"),
    **dict.fromkeys(("relu", "gelu", "silu", "sigmoid", "tanh", "hardtanh", "leaky_relu", "leakyrelu", "elu",
                     "selu", "mish", "softplus", "hardswish", "hardsigmoid", "exp", "log", "sin", "cos", "abs",
                     "clamp", "where", "pow", "sqrt", "rsqrt", "erf", "dropout", "add", "sub", "mul", "div",
                     "neg", "reciprocal", "sign", "minimum", "maximum"), "elementwise"),
    **dict.fromkeys(("transpose", "permute", "index_select", "gather", "scatter",
                     "embedding", "embedding_bag", "embeddingbag", "cat", "stack"), "data_movement"),
}


def operations(task: Path) -> set[str]:
    """The operations the task's ``Model`` calls, lower-case and without their module (``matmul``, ``relu``,
    ``conv2d``, ``linear``, ...), as the task reader finds them; empty when the task cannot be read."""
    try:
        return {op.rsplit(".", 1)[-1].lower().rstrip("_") for op in read_task(task).ops}
    except KernelskillError as exc:
        log.warning("worked example: %s", exc)
        return set()


def families(ops: set[str]) -> set[str]:
    return {FAMILIES.get(op, op) for op in ops}


def similarity(task: Path, example_task: Path) -> tuple[float, list[str]]:
    """(score in [0, 1], the operation families both share): 0.7 x the overlap (Jaccard) of their
    operation families + 0.3 x the overlap of the exact operations."""
    a, b = operations(task), operations(example_task)
    if not a or not b:
        return 0.0, []
    fa, fb = families(a), families(b)
    score = 0.7 * len(fa & fb) / len(fa | fb) + 0.3 * len(a & b) / len(a | b)
    return round(score, 4), sorted(fa & fb)


def label(example_source: str) -> str:
    """What the example computes, at which shape: the first paragraph of its docstring, on one line."""
    try:
        doc = ast.get_docstring(ast.parse(example_source)) or ""
    except SyntaxError:
        return ""
    first = doc.strip().split("\n\n", 1)[0]
    return " ".join(first.split()).rstrip(":.;, ")


def worked_example(paths: list[str], task: Path) -> dict[str, Any] | None:
    """The worked example at ``paths`` (its task, before and after files, as a query result lists them)
    as the prompts show it: ``label``, ``similarity`` to ``task``, the shared operation families
    (``shared``), and the ``before`` / ``after`` code. None when its files cannot be read."""
    if len(paths) < 3:
        return None
    try:
        example_task, before, after = (Path(p).read_text() for p in paths[:3])
    except OSError as exc:
        log.warning("worked example %s: %s", paths[0], exc)
        return None
    score, shared = similarity(task, Path(paths[0]))
    return {"label": label(example_task), "similarity": score, "shared": shared, "before": before, "after": after}
