"""Facts about the target GPU (SM count, memory bandwidth, L2 size, peak FLOP/s) from ``gpus.json``.

The prompts state them (the code-writing roles size grids and tiles from them) and the speed-of-light
check divides by them. Looked up by device name, else by arch; standard library only.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("gpus.json")


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def gpu_facts(name: str | None = None, arch: str | None = None) -> dict[str, Any]:
    """The facts of the GPU whose name contains a known key (``"NVIDIA H200"`` -> h200), else of the
    arch's default GPU; ``{}`` when neither is known."""
    table = _table()
    low = (name or "").lower()
    for key, facts in table["gpus"].items():
        if key in low:
            return dict(facts)
    key = table["by_arch"].get(arch or "")
    return dict(table["gpus"][key]) if key else {}


__all__ = ["gpu_facts"]
