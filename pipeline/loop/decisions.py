"""Whether a candidate beats its parent, decided from the measurements alone.

The harness times every candidate against eager and reports its speedup with a 95 % confidence interval
(``speedup_ci: [lo, hi]``). When both the candidate and its parent carry one, the question "is the candidate
faster than its parent?" is asked of the ratio of their speedups, ``r = s_child / s_parent``, with the two
intervals combined in log space (each measurement has its own eager baseline and its own samples, so the two
are independent, and the half-widths of the log-intervals add in quadrature)::

    lo(r) = exp(ln r - sqrt(d_child_low ** 2 + d_parent_high ** 2))
    hi(r) = exp(ln r + sqrt(d_child_high ** 2 + d_parent_low ** 2))

where ``d_x_low = ln s_x - ln lo_x`` and ``d_x_high = ln hi_x - ln s_x`` (negative distances, for a point
outside its own interval, count as 0). The candidate is **improved** when ``lo(r) > 1.0`` (the whole interval
of the ratio lies above 1); otherwise it is **within noise** (or **slower** when ``hi(r) < 1.0``).

Without an interval on either side the older rule decides: improved when ``s_child > s_parent * (1 + noise)``
with ``noise`` the larger of the two candidates' relative IQRs (IQR of the timed trials over their median).

The LLM reviewer does not take part: it reads the code for cheating, never the numbers (``agents.review``).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel

#: the ratio's lower bound a candidate must pass to count as faster than its parent
IMPROVED_ABOVE = 1.0


class SpeedDecision(BaseModel):
    """The measurements' verdict on a candidate against its parent."""

    improved: bool
    verdict: Literal["improved", "within_noise", "slower"]
    rule: Literal["interval", "iqr"]
    ratio: float  # candidate speedup / parent speedup
    ratio_low: float | None = None  # interval rule: the combined 95 % interval of the ratio
    ratio_high: float | None = None
    noise: float | None = None  # IQR rule: the relative timing noise that had to be beaten
    reason: str


def speedup_interval(result: dict[str, Any]) -> tuple[float, float] | None:
    """A result's ``speedup_ci`` as ``(lo, hi)`` when it is a usable interval (two positive numbers, lo <= hi)."""
    ci = result.get("speedup_ci")
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return None
    lo, hi = ci
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (lo, hi)):
        return None
    if lo <= 0 or hi < lo:
        return None
    return float(lo), float(hi)


def relative_iqr(result: dict[str, Any]) -> float:
    """A result's timing noise: the IQR of its median time over the median (0 when not measured)."""
    ms, iqr = result.get("candidate_ms"), result.get("candidate_iqr_ms")
    if isinstance(ms, int | float) and isinstance(iqr, int | float) and ms > 0 and iqr >= 0:
        return float(iqr) / float(ms)
    return 0.0


def ratio_interval(child: float, child_ci: tuple[float, float], parent: float,
                   parent_ci: tuple[float, float]) -> tuple[float, float]:
    """The 95 % interval of ``child / parent`` from the two speedups' intervals (the module docstring)."""
    def below(s: float, ci: tuple[float, float]) -> float:
        return max(math.log(s) - math.log(ci[0]), 0.0)

    def above(s: float, ci: tuple[float, float]) -> float:
        return max(math.log(ci[1]) - math.log(s), 0.0)

    log_ratio = math.log(child) - math.log(parent)
    low = math.hypot(below(child, child_ci), above(parent, parent_ci))
    high = math.hypot(above(child, child_ci), below(parent, parent_ci))
    return math.exp(log_ratio - low), math.exp(log_ratio + high)


def compare_to_parent(result: dict[str, Any], parent: dict[str, Any]) -> SpeedDecision:
    """Is the correct candidate ``result`` faster than its ``parent`` (both eval views), by the measurements?"""
    speed = float(result.get("speedup") or 0.0)
    parent_speed = float(parent.get("speedup") or 0.0)
    if speed <= 0 or parent_speed <= 0:  # a parent without a speedup (never measured): any measured one beats it
        return SpeedDecision(improved=speed > 0, verdict="improved" if speed > 0 else "slower", rule="iqr",
                             ratio=0.0, reason=f"measured {speed:.3f}x vs parent {parent_speed:.3f}x")
    ratio = speed / parent_speed
    child_ci, parent_ci = speedup_interval(result), speedup_interval(parent)
    if child_ci is not None and parent_ci is not None:
        lo, hi = ratio_interval(speed, child_ci, parent_speed, parent_ci)
        verdict = "improved" if lo > IMPROVED_ABOVE else "slower" if hi < IMPROVED_ABOVE else "within_noise"
        said = {"improved": "faster than its parent", "slower": "slower than its parent",
                "within_noise": "within the timing noise of its parent"}[verdict]
        reason = (f"{speed:.3f}x [{child_ci[0]:.3f}, {child_ci[1]:.3f}] vs parent {parent_speed:.3f}x "
                  f"[{parent_ci[0]:.3f}, {parent_ci[1]:.3f}]: ratio {ratio:.3f}, 95 % interval "
                  f"[{lo:.3f}, {hi:.3f}], {said}")
        return SpeedDecision(improved=verdict == "improved", verdict=verdict, rule="interval", ratio=ratio,
                             ratio_low=lo, ratio_high=hi, reason=reason)
    noise = max(relative_iqr(result), relative_iqr(parent))
    improved = speed > parent_speed * (1.0 + noise)
    verdict = "improved" if improved else "slower" if speed <= parent_speed else "within_noise"
    reason = {"improved": f"measured {speed:.3f}x vs parent {parent_speed:.3f}x, beyond the timing noise ({noise:.1%})",
              "slower": f"measured {speed:.3f}x <= parent {parent_speed:.3f}x",
              "within_noise": f"measured {speed:.3f}x, within the timing noise ({noise:.1%}) of parent "
                              f"{parent_speed:.3f}x"}[verdict]
    return SpeedDecision(improved=improved, verdict=verdict, rule="iqr", ratio=ratio, noise=noise, reason=reason)


def noise_rule_text(result: dict[str, Any] | None = None, parent: dict[str, Any] | None = None) -> str:
    """The rule in words, as the prompts state it (the interval rule when both results carry an interval)."""
    if result is not None and parent is not None and speedup_interval(result) and speedup_interval(parent):
        return ("a candidate replaces its parent only when the 95 % interval of (its speedup / the parent's "
                "speedup), the two speedups' intervals combined in log space, lies wholly above 1.0; otherwise "
                "it is within noise and the parent stays")
    return ("a candidate replaces its parent only when its speedup exceeds the parent's by more than the timing "
            "noise (the larger relative IQR of the two medians), or, where both carry a 95 % interval, when the "
            "combined interval of the ratio of speedups lies wholly above 1.0")
