"""The default correctness tolerances, shared by the harness (which checks with them) and the query
(which vetoes precision methods by them). Standard library only: the harness and a cold query both
import it without torch.
"""

from __future__ import annotations

DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    # dtype -> (atol, rtol); KernelBench's current defaults
    "float32": (1e-4, 1e-4),
    "float64": (1e-7, 1e-7),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}
