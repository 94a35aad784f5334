"""The light prelude of a load_inline CUDA unit: ``ATen/core/Tensor.h`` plus the per-operator headers of the
``torch::``/``at::`` functions the unit names, instead of ``torch/extension.h``. nvcc parsing the whole of
ATen is most of a load_inline build; see docs/harness.md. Also the build failure every route raises.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path


class CandidateBuildError(RuntimeError):
    def __init__(self, message: str, log_text: str) -> None:
        super().__init__(message)
        self.log = log_text


HEAVY_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](torch/extension\.h|torch/types\.h|'
                               r'torch/torch\.h|torch/all\.h|ATen/ATen\.h)[>"][^\n]*$', re.M)
_FUNC_RE = re.compile(r"\b(?:torch|at)::(\w+)\s*(?:<[^<>()]*>)?\s*\(")
NEEDS_FULL_RE = re.compile(r"PYBIND11|pybind11|\bpy::|torch::nn\b|torch::optim\b|torch::jit\b|"
                            r"torch::autograd\b|torch::data\b|torch::serialize\b|at::native\b")
_BASE_PRELUDE = [
    "#include <ATen/core/Tensor.h>",
    "#include <c10/core/Scalar.h>",
    "#include <c10/core/TensorOptions.h>",
    "#include <c10/util/Exception.h>",
    "#include <c10/core/ScalarType.h>",
    "#include <cuda.h>",
    "#include <cuda_runtime.h>",
]
#: what a per-operator header includes beyond the tensor itself (ATen/Context.h and friends: about 90k
#: lines after preprocessing); the inline functions of the header need none of it
_OP_HEAVY_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*<(ATen/Context\.h|ATen/DeviceGuard\.h|ATen/TensorUtils\.h|'
                          r'ATen/TracerMode\.h|ATen/Functions\.h|ATen/ops/empty_like\.h)>[^\n]*$', re.M)
_PRAGMA_ONCE_RE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[^\n]*$", re.M)


@functools.lru_cache(maxsize=1)
def _aten_ops_dir() -> Path | None:
    try:
        from torch.utils.cpp_extension import include_paths

        for p in include_paths():
            d = Path(p) / "ATen" / "ops"
            if d.is_dir():
                return d
    except Exception:  # noqa: BLE001 - torch without headers: no light route
        return None
    return None


@functools.lru_cache(maxsize=512)
def _slim(path: Path, guard: str) -> str:
    """A torch header inlined without its heavy includes (each block guarded so it appears once)."""
    text = _PRAGMA_ONCE_RE.sub("", _OP_HEAVY_RE.sub("", path.read_text(encoding="utf-8")))
    return f"#ifndef KS_SLIM_{guard}\n#define KS_SLIM_{guard}\n{text}\n#endif\n"


def light_cuda_source(source: str) -> str | None:
    """The CUDA unit with a light prelude, or None when the source needs the full headers.

    The prelude is ``ATen/core/Tensor.h`` and the c10 basics, then the per-operator headers of the
    ``torch::``/``at::`` functions the unit names and ``ATen/TensorOperators.h`` (Tensor ``+``, ``*``...),
    each inlined without the ATen/Context.h family it includes but does not use; ``ATen/Dispatch.h``
    only when the unit uses ``AT_DISPATCH``. About 40 % fewer lines for nvcc's three passes than
    per-operator headers included as they are.
    """
    if NEEDS_FULL_RE.search(source):
        return None
    ops_dir = _aten_ops_dir()
    if ops_dir is None:
        return None
    body = HEAVY_INCLUDE_RE.sub("", source)
    names = sorted(set(_FUNC_RE.findall(body)) | {"empty_like"})
    parts = list(_BASE_PRELUDE)
    if "AT_DISPATCH" in body:
        parts.append("#include <ATen/Dispatch.h>")
    # the unit's first own line: it ends the part that is the same for every unit (host_pch cuts there)
    parts.append("namespace torch { using namespace at; }")
    for name in names:
        header = ops_dir / f"{name}.h"
        if header.is_file():
            parts.append(_slim(header, f"OP_{name}"))
    operators = ops_dir.parent / "TensorOperators.h"
    if operators.is_file():
        parts.append(_slim(operators, "TENSOR_OPERATORS"))
    prelude = "\n".join(parts) + "\n"
    return prelude + "#line 1\n" + body
