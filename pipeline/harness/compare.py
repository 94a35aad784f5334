"""Comparing candidate outputs with reference outputs: per-dtype tolerances, NaN/Inf, tuples, shapes.

``allclose`` alone lets an all-zero output pass when the reference is tiny (softmax over 393216
columns has values near 2.5e-6, below atol=1e-4), so a relative L2 error bound is applied as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .results import MISMATCH, OK, WRONG_SHAPE, EvalConfig


@dataclass
class Comparison:
    status: str  # ok | wrong_shape | mismatch
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK


def flatten_outputs(out: Any) -> list[Any]:
    """A forward's result as a flat list (tensors, tuples/lists of tensors, scalars)."""
    if isinstance(out, tuple | list):
        flat: list[Any] = []
        for item in out:
            flat.extend(flatten_outputs(item))
        return flat
    if isinstance(out, dict):
        return [v for k in sorted(out) for v in flatten_outputs(out[k])]
    return [out]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _unravel(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    out: list[int] = []
    for dim in reversed(shape):
        out.append(flat_index % dim if dim else 0)
        flat_index //= max(dim, 1)
    return list(reversed(out))


_CHUNK = 1 << 25


def compare_tensor(ref: torch.Tensor, out: Any, config: EvalConfig, *, where: str = "output 0",
                   tol_dtype: torch.dtype | None = None) -> Comparison:
    """Compare one tensor; statistics are accumulated in chunks so 6 GB outputs need little memory."""
    if not isinstance(out, torch.Tensor):
        return Comparison(WRONG_SHAPE, f"{where}: expected a tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(WRONG_SHAPE, f"{where}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}",
                          {"expected_shape": list(ref.shape), "got_shape": list(out.shape)})
    if out.dtype != ref.dtype and tol_dtype is None:
        return Comparison(MISMATCH, f"{where}: dtype {dtype_name(out.dtype)} != reference "
                          f"{dtype_name(ref.dtype)}", {"check": "dtype"})
    if out.device != ref.device:
        out = out.to(ref.device)
    atol, rtol = config.tolerance(dtype_name(tol_dtype or ref.dtype))
    o_flat = out.detach().reshape(-1)
    r_flat = ref.detach().reshape(-1)
    if not ref.is_floating_point():
        neq = o_flat != r_flat
        n_bad = int(neq.sum())
        if n_bad == 0:
            return Comparison(OK)
        first = _unravel(int(torch.nonzero(neq)[0, 0]), tuple(ref.shape))
        return Comparison(MISMATCH, f"{where}: {n_bad} of {neq.numel()} elements differ, first bad index "
                          f"{first}", {"first_bad_index": first, "bad_elements": n_bad, "check": "exact"})
    work = torch.float64 if torch.float64 in (ref.dtype, out.dtype) else torch.float32
    max_abs = max_rel = 0.0
    err_sq = ref_sq = 0.0
    n_bad = n_nonfinite = 0
    first_flat: int | None = None
    for lo in range(0, r_flat.numel(), _CHUNK):
        o = o_flat[lo:lo + _CHUNK].to(work)
        r = r_flat[lo:lo + _CHUNK].to(work)
        fo = torch.isfinite(o)
        fr = torch.isfinite(r)
        both = fo & fr
        same_special = (~fo) & (~fr) & ((o == r) | (torch.isnan(o) & torch.isnan(r)))
        diff = torch.where(both, (o - r).abs(), torch.zeros_like(o))
        bound = atol + rtol * torch.where(fr, r.abs(), torch.zeros_like(r))
        bad = (diff > bound) | ((~both) & ~same_special)
        nb = int(bad.sum())
        if nb and first_flat is None:
            first_flat = lo + int(torch.nonzero(bad)[0, 0])
        n_bad += nb
        n_nonfinite += int(((~fo) & ~same_special).sum())
        if diff.numel():
            max_abs = max(max_abs, float(diff.max()))
            rel = torch.where(fr, diff / r.abs().clamp_min(1e-30), torch.zeros_like(diff))
            max_rel = max(max_rel, float(torch.where(diff > 0, rel, torch.zeros_like(rel)).max()))
            err_sq += float((diff.double() ** 2).sum())
            ref_sq += float((torch.where(both, r, torch.zeros_like(r)).double() ** 2).sum())
    ref_norm = ref_sq ** 0.5
    err_norm = err_sq ** 0.5
    rel_l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
    details: dict[str, Any] = {"max_abs_err": max_abs, "max_rel_err": max_rel, "rel_l2_err": rel_l2,
                               "atol": atol, "rtol": rtol}
    if n_bad:
        first = _unravel(first_flat or 0, tuple(ref.shape))
        got = float(o_flat[first_flat or 0])
        exp = float(r_flat[first_flat or 0])
        what = f"{n_nonfinite} non-finite values" if n_nonfinite else "values differ"
        details.update(first_bad_index=first, bad_elements=n_bad, nonfinite=n_nonfinite, check="allclose")
        return Comparison(MISMATCH, f"{where}: {what}: {n_bad} of {r_flat.numel()} elements outside "
                          f"atol={atol:g} rtol={rtol:g}; max abs err {max_abs:.3g}, max rel err {max_rel:.3g}, "
                          f"first bad index {first} (got {got:.6g}, expected {exp:.6g})", details)
    limit = max(rtol, 1e-6) * 10
    if ref_norm > 0 and rel_l2 > limit:
        details["check"] = "relative_l2"
        return Comparison(MISMATCH, f"{where}: relative L2 error {rel_l2:.3g} exceeds {limit:g} (allclose "
                          "passed only because the reference values are small against atol)", details)
    return Comparison(OK, "", details)


def compare_outputs(ref: Any, out: Any, config: EvalConfig, *, tol_dtype: torch.dtype | None = None) -> Comparison:
    """Compare every output (tuples too); the worst details are kept."""
    refs = flatten_outputs(ref)
    outs = flatten_outputs(out)
    if len(refs) != len(outs):
        return Comparison(WRONG_SHAPE, f"candidate returned {len(outs)} outputs, reference {len(refs)}",
                          {"expected_outputs": len(refs), "got_outputs": len(outs)})
    worst: dict[str, Any] = {}
    for i, (r, o) in enumerate(zip(refs, outs, strict=True)):
        where = f"output {i}"
        if isinstance(r, torch.Tensor):
            res = compare_tensor(r, o, config, where=where, tol_dtype=tol_dtype)
        elif isinstance(r, int | float | bool):
            o_val = o.item() if isinstance(o, torch.Tensor) and o.numel() == 1 else o
            if not isinstance(o_val, int | float | bool):
                res = Comparison(WRONG_SHAPE, f"{where}: expected a number, got {type(o).__name__}")
            else:
                atol, rtol = config.tolerance("float32")
                ok = abs(float(o_val) - float(r)) <= atol + rtol * abs(float(r))
                res = Comparison(OK if ok else MISMATCH, "" if ok else f"{where}: {o_val} != {r}")
        else:
            res = Comparison(OK if o == r else MISMATCH, "" if o == r else f"{where}: {o!r} != {r!r}")
        if not res.ok:
            res.details["output_index"] = i
            return res
        for key in ("max_abs_err", "max_rel_err", "rel_l2_err"):
            if key in res.details:
                worst[key] = max(worst.get(key, 0.0), res.details[key])
    return Comparison(OK, "", worst)


def normalized_error_parts(ref: Any, out: Any) -> list[tuple[float, float]]:
    """Per floating output: (max |out - ref|, max |ref|), accumulated over chunks (float64 copies of one chunk
    at a time, never of a 6 GB output). Parts of slices of the same outputs combine by taking maxima."""
    parts: list[tuple[float, float]] = []
    for r, o in zip(flatten_outputs(ref), flatten_outputs(out), strict=False):
        if isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor) and r.is_floating_point() \
                and o.shape == r.shape:
            rf, of = r.detach().reshape(-1), o.detach().reshape(-1).to(r.device)
            scale = err = 0.0
            for start in range(0, rf.numel(), _CHUNK):
                rd = rf[start:start + _CHUNK].double()
                od = of[start:start + _CHUNK].double()
                if rd.numel():
                    scale = max(scale, float(rd.abs().max()))
                    err = max(err, float((od - rd).abs().nan_to_num(float("inf")).max()))
            parts.append((err, scale))
    return parts


def combine_error_parts(acc: list[tuple[float, float]] | None, parts: list[tuple[float, float]]
                        ) -> list[tuple[float, float]]:
    if acc is None:
        return list(parts)
    return [(max(a[0], b[0]), max(a[1], b[1])) for a, b in zip(acc, parts, strict=True)]


def normalized_error(parts: list[tuple[float, float]]) -> float:
    return max((err / scale if scale > 0 else err for err, scale in parts), default=0.0)


def max_normalized_error(ref: Any, out: Any) -> float:
    """max |out - ref| / max |ref| over all floating outputs (used by the precision check)."""
    return normalized_error(normalized_error_parts(ref, out))


def fingerprint(out: Any) -> list[tuple[Any, ...]]:
    """An exact summary of a forward's outputs (shape, dtype, float64 sum and sum of squares, chunked): equal
    fingerprints mean, for any practical purpose, identical outputs; it replaces keeping the outputs alive."""
    prints: list[tuple[Any, ...]] = []
    for o in flatten_outputs(out):
        if not isinstance(o, torch.Tensor):
            prints.append(("value", repr(o)))
            continue
        flat = o.detach().reshape(-1)
        s1 = s2 = 0.0
        for start in range(0, flat.numel(), _CHUNK):
            c = flat[start:start + _CHUNK].double()
            s1 += float(c.nan_to_num(1e300).sum())
            s2 += float((c.nan_to_num(1e300) ** 2).sum())
        prints.append((tuple(o.shape), str(o.dtype), s1, s2))
    return prints
