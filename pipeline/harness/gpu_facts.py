"""Facts about the target GPU (SM count, memory bandwidth, L2 size, peak FLOP/s) from ``gpus.json``.

The prompts state them (the code-writing roles size grids and tiles from them) and the speed-of-light
check divides by them. Looked up by device name, else by arch. Standard library and the protocols leaf.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from kernelskill.protocols import load_protocol

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




def prompt_gpu(arch: str, *, name: str | None = None, protocol: str | None = None) -> dict[str, Any]:
    """What the code-writing prompts get as ``gpu``: name, arch, the facts above, and ``contract`` (the
    run's protocol as a dict, read by ``prompts/partials/contract.j2``)."""
    facts = gpu_facts(name, arch)
    out: dict[str, Any] = {"name": facts.get("name") or name or "NVIDIA GPU", "arch": arch, "notes": ""}
    out.update({k: v for k, v in facts.items() if k not in ("name", "arch", "source")})
    out["contract"] = load_protocol(protocol).to_dict()
    return out


__all__ = ["gpu_facts", "prompt_gpu"]
