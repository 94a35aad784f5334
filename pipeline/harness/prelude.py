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
    # Tensor operators (+, *, ...) without ATen/Functions.h: their per-operator variant
    "#ifndef AT_PER_OPERATOR_HEADERS\n#define AT_PER_OPERATOR_HEADERS\n#define KS_PER_OP_DEFINED\n#endif",
    "#include <ATen/TensorOperators.h>",
    "#ifdef KS_PER_OP_DEFINED\n#undef AT_PER_OPERATOR_HEADERS\n#undef KS_PER_OP_DEFINED\n#endif",
    "#include <ATen/Dispatch.h>",
    "#include <c10/util/Exception.h>",
    "#include <c10/core/ScalarType.h>",
    "#include <cuda.h>",
    "#include <cuda_runtime.h>",
]


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


def light_cuda_source(source: str) -> str | None:
    """The CUDA unit with a light prelude, or None when the source needs the full headers."""
    if NEEDS_FULL_RE.search(source):
        return None
    ops_dir = _aten_ops_dir()
    if ops_dir is None:
        return None
    body = HEAVY_INCLUDE_RE.sub("", source)
    names = sorted(set(_FUNC_RE.findall(body)))
    includes = list(_BASE_PRELUDE)
    for name in names:
        if (ops_dir / f"{name}.h").is_file():
            includes.append(f"#include <ATen/ops/{name}.h>")
    if "TensorOptions" in body or "dtype(" in body or "options()" in body:
        includes.append("#include <c10/core/TensorOptions.h>")
    prelude = "\n".join(includes) + "\nnamespace torch { using namespace at; }\n"
    return prelude + "#line 1\n" + body


