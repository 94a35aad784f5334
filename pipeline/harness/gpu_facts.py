"""Facts about the target GPU (SM count, memory bandwidth, L2 size, peak FLOP/s) from ``gpus.json``.

The prompts state them (the code-writing roles size grids and tiles from them) and the speed-of-light
check divides by them. Looked up by device name, else by arch. Standard library and the protocols leaf.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from kernelskill.protocols import PRECISION_DTYPES, check_precision, load_protocol

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


#: the facts an evaluation measures on its device (``EvalResult.details["gpu"]``) that the prompts state
MEASURED_KEYS = ("name", "arch", "sm_count", "l2_mb", "memory_gb", "copy_tb_s")


def prompt_gpu(arch: str, *, name: str | None = None, protocol: str | None = None,
               evaluated: dict[str, Any] | None = None, previous: dict[str, Any] | None = None,
               precision: str | None = None) -> dict[str, Any]:
    """What the code-writing prompts get as ``gpu``: name, arch, the facts above, and ``contract`` (the
    run's protocol as a dict, read by ``prompts/partials/contract.j2``, with ``precision``: the dtype the task
    runs in, and ``precision_dtype``, its torch name).

    ``evaluated`` is the ``details["gpu"]`` of the run's last evaluation: the device that evaluates is the one
    the prompts describe (its name, SMs, L2, memory and measured copy bandwidth win over the table's, which
    fills the data-sheet figures). ``previous`` is the one before it: when the name differs, ``moved_from``
    says that the run moved to another card."""
    ev = {k: evaluated[k] for k in MEASURED_KEYS if evaluated and evaluated.get(k) not in (None, "")}
    facts = gpu_facts(ev.get("name") or name, ev.get("arch") or arch)
    out: dict[str, Any] = {"name": ev.get("name") or facts.get("name") or name or "NVIDIA GPU",
                           "arch": ev.get("arch") or arch, "notes": ""}
    out.update({k: v for k, v in facts.items() if k not in ("name", "arch", "source")})
    out.update({k: v for k, v in ev.items() if k not in ("name", "arch")})
    if ev:
        out["measured"] = True  # the facts come from the device of the last evaluation
    if previous and previous.get("name") and ev.get("name") and previous["name"] != ev["name"]:
        out["moved_from"] = previous["name"]
    out["contract"] = load_protocol(protocol).to_dict()
    out["contract"]["precision"] = check_precision(precision)
    out["contract"]["precision_dtype"] = PRECISION_DTYPES[out["contract"]["precision"]]
    return out


__all__ = ["MEASURED_KEYS", "gpu_facts", "prompt_gpu"]
