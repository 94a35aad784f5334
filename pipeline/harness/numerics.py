"""The numeric path: the backend settings (TF32 modes, cuDNN/cuBLAS math modes, deterministic algorithms) a
forward runs under, captured, applied and compared as one value.

One numeric path: a candidate is verified under :data:`Role.VERIFY` settings (IEEE fp32) and timed under
exactly the settings it was verified under; the eager and ``torch.compile`` baselines are timed under
PyTorch's shipped defaults (:func:`timing_settings`). Whatever a candidate switches inside its own forward
(a ``torch.backends.cudnn.flags(...)`` scope around an error-compensated TF32 convolution, or a flag set and
never reset) is confined to its call (:func:`confined`): the harness applies the verified settings before
each candidate call and puts them back after it, so the switch happens the same way while it is verified
and while it is timed, and never reaches the reference. Whether the result is accurate enough is then
decided by the tolerance and the float64 check, not by which flags were touched.

The settings are captured through PyTorch's ``fp32_precision`` attributes where they exist (reading the
legacy ``allow_tf32`` flags raises after a mix of the two APIs) and the legacy flags otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

_B = torch.backends

#: the fp32 precision attributes of PyTorch's newer TF32 API, parent first (absent on older versions)
_PRECISION: tuple[tuple[str, Any], ...] = tuple(
    (name, obj) for name, obj in (
        ("backends", _B),
        ("cuda.matmul", getattr(_B.cuda, "matmul", None)),
        ("cudnn", _B.cudnn),
        ("cudnn.conv", getattr(_B.cudnn, "conv", None)),
        ("cudnn.rnn", getattr(_B.cudnn, "rnn", None)),
    ) if obj is not None and isinstance(getattr(obj, "fp32_precision", None), str))

VERIFY = "verify"
CANDIDATE = "candidate"
BASELINES = ("reference", "reference_ieee", "compile")


@dataclass(frozen=True)
class BackendSettings:
    """A snapshot of every backend switch that changes a forward's numerics (sorted key/value pairs)."""

    values: tuple[tuple[str, Any], ...]

    @classmethod
    def current(cls) -> BackendSettings:
        v: dict[str, Any] = {}
        if _PRECISION:  # the precision each path resolves to (tf32 or ieee), however it was spelled
            raw = {f"{name}.fp32_precision": obj.fp32_precision for name, obj in _PRECISION}
            for path in ("cuda.matmul", "cudnn.conv", "cudnn.rnn"):
                v[f"{path}.tf32"] = _effective(raw, path) == "tf32"
        else:  # pragma: no cover - PyTorch before the fp32_precision API
            v["cuda.matmul.tf32"] = bool(_B.cuda.matmul.allow_tf32)
            v["cudnn.conv.tf32"] = v["cudnn.rnn.tf32"] = bool(_B.cudnn.allow_tf32)
        v["float32_matmul_precision"] = torch.get_float32_matmul_precision()
        v["cudnn.enabled"] = bool(_B.cudnn.enabled)
        v["cudnn.benchmark"] = bool(_B.cudnn.benchmark)
        v["cudnn.deterministic"] = bool(_B.cudnn.deterministic)
        v["deterministic_algorithms"] = bool(torch.are_deterministic_algorithms_enabled())
        v["deterministic_warn_only"] = bool(torch.is_deterministic_algorithms_warn_only_enabled())
        for key in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
            if hasattr(_B.cuda.matmul, key):
                v[f"cuda.matmul.{key}"] = getattr(_B.cuda.matmul, key)
        return cls(tuple(sorted(v.items())))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)

    def apply(self) -> None:
        """Make these the process's settings. TF32 is set through PyTorch's legacy switches, which keep cuDNN's
        convolution and RNN paths in step: setting the newer ``fp32_precision`` attributes one at a time leaves
        PyTorch's legacy getter raising ("a mix of the legacy and new APIs"), and candidates commonly switch TF32
        with ``torch.backends.cudnn.flags(allow_tf32=...)``, which reads it. Only a state the legacy switches
        cannot express (convolution and RNN apart) is set through the newer attributes."""
        v = self.as_dict()
        if torch.get_float32_matmul_precision() != v["float32_matmul_precision"]:
            torch.set_float32_matmul_precision(v["float32_matmul_precision"])
        _B.cuda.matmul.allow_tf32 = bool(v["cuda.matmul.tf32"])
        conv, rnn = bool(v["cudnn.conv.tf32"]), bool(v["cudnn.rnn.tf32"])
        if _PRECISION and (_B.fp32_precision != "none" or _B.cudnn.fp32_precision != "none"):
            _B.fp32_precision = "none"  # a global or cuDNN-wide precision would override the paths below
            _B.cudnn.fp32_precision = "none"
        if conv == rnn or not _PRECISION:
            _B.cudnn.allow_tf32 = conv
        else:
            _B.cudnn.conv.fp32_precision = "tf32" if conv else "ieee"
            _B.cudnn.rnn.fp32_precision = "tf32" if rnn else "ieee"
        _B.cudnn.enabled = v["cudnn.enabled"]
        _B.cudnn.benchmark = v["cudnn.benchmark"]
        _B.cudnn.deterministic = v["cudnn.deterministic"]
        if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) \
                != (v["deterministic_algorithms"], v["deterministic_warn_only"]):
            torch.use_deterministic_algorithms(v["deterministic_algorithms"], warn_only=v["deterministic_warn_only"])
        for key in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
            if f"cuda.matmul.{key}" in v:
                setattr(_B.cuda.matmul, key, v[f"cuda.matmul.{key}"])

    def differences(self, other: BackendSettings) -> dict[str, list[Any]]:
        """``{key: [self's value, other's value]}`` for every switch that differs."""
        a, b = self.as_dict(), other.as_dict()
        return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}

    def describe(self) -> dict[str, Any]:
        """The switches that matter to a reader: TF32 for matmul and cuDNN convolutions, and the math modes."""
        v = self.as_dict()
        out: dict[str, Any] = {"matmul_tf32": v["cuda.matmul.tf32"], "cudnn_conv_tf32": v["cudnn.conv.tf32"]}
        out.update({k: v[k] for k in ("cudnn.enabled", "cudnn.benchmark", "cudnn.deterministic",
                                      "deterministic_algorithms")})
        return out


def _effective(v: dict[str, Any], name: str) -> str:
    """The precision a child attribute resolves to: its own, else its parent's ("none" inherits)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        value = v.get(".".join(parts[:i]) + ".fp32_precision")
        if value not in (None, "none"):
            return str(value)
    value = v.get("backends.fp32_precision")
    return str(value) if value not in (None, "none") else "ieee"


def ieee_fp32() -> BackendSettings:
    """Switch TF32 off everywhere (cuBLAS and cuDNN compute in IEEE fp32) and return the resulting settings."""
    _B.cuda.matmul.allow_tf32 = False
    _B.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return BackendSettings.current()


def timing_settings(role: str, *, verified: BackendSettings, defaults: BackendSettings) -> BackendSettings:
    """The settings a function is timed under: the candidate under those it was verified under, the eager and
    torch.compile baselines under PyTorch's defaults (``reference_ieee``, eager with TF32 off, under the
    verified ones)."""
    if role in (CANDIDATE, "reference_ieee"):
        return verified
    if role in BASELINES:
        return defaults
    raise ValueError(f"timing_settings: unknown role {role!r}")


@contextlib.contextmanager
def applied(settings: BackendSettings) -> Iterator[None]:
    """Run a block under ``settings``; the settings before it are back afterwards."""
    before = BackendSettings.current()
    settings.apply()
    try:
        yield
    finally:
        before.apply()


def confined(fn: Callable[..., Any], settings: BackendSettings,
             switched: dict[str, list[Any]] | None = None) -> Callable[..., Any]:
    """``fn`` called under ``settings``, which are put back after it whatever it switched; what it switched
    (and never put back) is merged into ``switched``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        settings.apply()
        try:
            return fn(*args, **kwargs)
        finally:
            now = BackendSettings.current()
            if now != settings:
                if switched is not None:
                    switched.update(settings.differences(now))
                settings.apply()

    return call


__all__ = ["BackendSettings", "applied", "confined", "ieee_fp32", "timing_settings"]
