"""The one way from the user's harness settings to an :class:`EvalConfig`.

``kernelskill eval``, the optimize loop's evaluator and the GPU side of a split run all call
:func:`eval_config`, so they judge with the same protocol, tolerances and limits and build into the
same cache. Standard library only (the settings arrive as a plain dict: ``HarnessSettings.model_dump()``
or a run manifest's ``harness`` table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kernelskill.protocols import load_protocol

from .results import EvalConfig

#: settings keys that are not EvalConfig fields (they configure the caller, not one evaluation)
CALLER_KEYS = frozenset({"build_jobs"})


def eval_config(settings: Mapping[str, Any] | None = None, *, protocol: str | None = None,
                seed: int | None = None, cache_dir: str | None = None, **overrides: Any) -> EvalConfig:
    """An EvalConfig from harness settings: the protocol first, then the settings, then the arguments.

    ``protocol`` (a preset name or a protocol file) wins over ``settings["protocol"]``. A settings
    ``library_policy`` or ``atol``/``rtol`` that is set overrides the protocol's (explicit settings win);
    ``None`` values and unknown keys are ignored. ``overrides`` are EvalConfig fields (e.g. ``baseline``).
    """
    values = {k: v for k, v in dict(settings or {}).items() if v is not None and k not in CALLER_KEYS}
    proto = load_protocol(protocol or values.pop("protocol", None))
    values.pop("protocol", None)
    names = {f.name for f in dataclasses.fields(EvalConfig)}
    fields = {k: v for k, v in values.items() if k in names}
    if seed is not None:
        fields["seed"] = seed
    if cache_dir is not None:
        fields["cache_dir"] = str(cache_dir)
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return EvalConfig.from_protocol(proto, **fields)


__all__ = ["eval_config"]
