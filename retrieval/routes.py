"""The strategic routes for the operation that holds the time, each with its speed-of-light ceiling, and
where the current kernel stands against them (``route_ceilings.yaml``: devices, rates, routes per op).

For the kernel the case is chosen for, the routes the KB knows for its operation (library, library with
compensation, fused epilogue, tensor-core scheme, hand-written tiles; one pass at bandwidth for memory-bound
operations) are listed in strategic order with: whether the protocol allows them (the KB's query vetoes,
evaluated on the query's environment), the rate they compute at under the protocol's precision, and their
ceiling for this task's work (:mod:`.work`: max(bytes / copy bandwidth, FLOPs / rate)). With a profile the
forward's measured kernel time is set against the current route's ceiling; within ``at_roofline_pct`` of it
the kernel is at its roofline: that route has nothing left, change route or stop.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kernelskill.errors import KernelskillError
from kernelskill.yaml_load import safe_load

from .engine import PredicateEvaluator, Rules, apply_vetoes
from .result import RouteCeiling, RouteReport
from .work import Work, estimate_work

RULES_PATH = Path(__file__).with_name("route_ceilings.yaml")
#: source signs of the route a custom kernel already takes (retrieval/applied_methods.yaml decides the rest)
_TENSOR_CORE_METHODS = ("tensor_core_mma", "wgmma_hopper")


@functools.cache
def load_ceilings(path: Path = RULES_PATH) -> dict[str, Any]:
    try:
        data = safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KernelskillError(f"{path}: cannot read the route ceilings: {exc}") from exc
    for op, routes in (data.get("routes") or {}).items():
        for r in routes:
            for key in ("precise", "relaxed"):
                if r.get(key) is not None and r[key] not in data.get("rates", {}):
                    raise KernelskillError(f"{path}: routes.{op}.{r.get('route')}: rate {r[key]!r} is not in rates")
    return data


def device_for(arch_sm: int | None, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """The device facts: by a name substring (``h100``) when given, else by the target arch (default H200)."""
    data = load_ceilings()
    devices = data["devices"]
    if name:
        key = next((k for k in devices if k in name.lower()), None)
        if key is not None:
            return key, devices[key]
    key = data.get("by_arch", {}).get(arch_sm or 90, "h200")
    return key, devices[key]


def _rate(data: dict[str, Any], device: dict[str, Any], rate: str | None) -> tuple[float | None, str]:
    if rate is None:
        return None, f"bandwidth {device['copy_tb_s']:g} TB/s"
    spec = data["rates"][rate]
    flops = float(device[spec["flops"]]) / float(spec.get("divide", 1))
    return flops * 1e12, f"{spec['label']} {flops:.4g} TFLOP/s"


def _relaxed(env: Mapping[str, Any]) -> bool:
    return env.get("task_dtype") in ("fp16", "bf16") or env.get("tf32_allowed") is True


def current_route(op: str, routes: list[dict[str, Any]], *, vendor: bool, applied: set[str]) -> str | None:
    """The route the kernel takes now: a vendor kernel the library; a custom kernel with tensor-core code the
    tensor-core scheme; else the hand-written route (or one pass for a bandwidth-bound operation)."""
    names = [r["route"] for r in routes]
    if vendor and "library" in names:
        return "library"
    if applied & set(_TENSOR_CORE_METHODS) and "tensor_core" in names:
        return "tensor_core"
    for fallback in ("hand_tiles", "one_pass"):
        if fallback in names:
            return fallback
    return names[-1] if names else None


def route_report(*, op: str | None, kernel: str | None, env: Mapping[str, Any], rules: Rules, methods: Mapping[str, Any],
                 task: str | Path | None, forward_ms: float | None, vendor: bool, applied: set[str],
                 device_name: str | None = None) -> RouteReport | None:
    """The routes of ``op`` with their ceilings and the current kernel against them (None: no routes known)."""
    data = load_ceilings()
    routes = (data.get("routes") or {}).get(op or "")
    if not routes:
        return None
    key, device = device_for(env.get("arch_sm"), device_name)
    work = estimate_work(task, env.get("task_dtype"), op) if task is not None else Work(how="no task given")
    relaxed = _relaxed(env)
    ev = PredicateEvaluator(dict(env), rules.predicates, [])
    known = [methods[m] for r in routes for m in r["methods"] if m in methods]

    class _Case:  # apply_vetoes names the case in what it forbids
        id = "routes"

    _, forbidden, _ = apply_vetoes(ev, rules, _Case(), list({m.id: m for m in known}.values()), [])
    removed = {f.id: f for f in forbidden}
    now = current_route(op or "", routes, vendor=vendor, applied=applied)
    out = RouteReport(op=op or "", kernel=kernel, device=device["name"], flops=work.flops, bytes=work.bytes,
                      work=work.how, forward_ms=forward_ms, current_route=now,
                      at_roofline_pct=float(data.get("at_roofline_pct", 90)))
    bw = float(device["copy_tb_s"]) * 1e12
    for r in routes:
        rate, label = _rate(data, device, r.get("relaxed" if relaxed else "precise"))
        ids = [m for m in r["methods"] if m in methods]
        blocked = [removed[m] for m in ids if m in removed]
        allowed = bool(ids) and len(blocked) < len(ids)
        t_mem = work.bytes / bw if work.bytes else None
        t_flop = work.flops / rate if (work.flops and rate) else None
        parts = [t for t in (t_mem, t_flop) if t is not None]
        if rate is not None and work.flops is None:
            parts = []  # a compute route without FLOPs has no honest ceiling
        ceiling = max(parts) * 1e3 if parts else None
        # an allowed route lists the methods that may take it (a vetoed one, ec_tf32_gemm in a bf16 task, is not
        # offered); a route not allowed keeps its methods beside the vetoes that removed them
        row = RouteCeiling(route=r["route"], methods=[m for m in ids if m not in removed] if allowed else ids,
                           allowed=allowed, rate=label, ceiling_ms=ceiling,
                           current=r["route"] == now,
                           why_not="; ".join(f"{f.id}: {f.veto or f.by}" for f in blocked) if not allowed else "")
        if ceiling is not None and forward_ms:
            row.pct_of_ceiling = round(100.0 * ceiling / forward_ms, 1)
        out.routes.append(row)
    cur = next((r for r in out.routes if r.current), None)
    if cur is not None and cur.pct_of_ceiling is not None:
        out.at_roofline = cur.pct_of_ceiling >= out.at_roofline_pct
        best = min((r for r in out.routes if r.allowed and r.ceiling_ms is not None), key=lambda r: r.ceiling_ms or 0,
                   default=None)
        if out.at_roofline:
            better = best is not None and best.route != cur.route and (best.ceiling_ms or 0) < 0.9 * (cur.ceiling_ms or 0)
            out.verdict = (f"at its roofline: {cur.pct_of_ceiling:.0f} % of the {cur.route} route's ceiling "
                           f"({cur.ceiling_ms:.3g} ms); " + (f"change route ({best.route}: {best.ceiling_ms:.3g} ms)"
                                                            if better else "stop: no allowed route is faster"))
        else:
            out.verdict = (f"{cur.pct_of_ceiling:.0f} % of the {cur.route} route's ceiling ({cur.ceiling_ms:.3g} ms "
                           f"vs {forward_ms:.3g} ms measured)"
                           + (f"; the best allowed route is {best.route} at {best.ceiling_ms:.3g} ms"
                              if best is not None and best.route != cur.route else ""))
    elif forward_ms is None:
        out.verdict = "no profile: ceilings only (pass --profile to see where the kernel stands)"
    else:
        out.verdict = f"no ceiling for the current route ({work.how})"
    return out
