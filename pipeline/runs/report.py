"""A run at a glance (:func:`summary`) and its markdown report."""

from __future__ import annotations

import logging
from typing import Any

from kernelskill.pipeline.runs.events import TASK
from kernelskill.pipeline.runs.gpu_steps import pending_request
from kernelskill.pipeline.runs.store import Run

log = logging.getLogger(__name__)


# Summaries and the report ----------------------------------------------------------------------
def summary(run: Run) -> dict[str, Any]:
    """One run at a glance, from its manifest and its log alone."""
    manifest = run.manifest
    events = run.log.events
    attempts = [e["data"] for e in events if e["type"] == "attempt"]
    llm = [e["data"] for e in events if e["type"] == "llm_call"]
    finished = [e["data"] for e in events if e["type"] == "run_finished"]
    accepted = [a["speedup"] for a in attempts if a.get("accepted") and a.get("speedup")]
    return {
        "id": run.id, "task": manifest.get("task_name", TASK), "created": manifest.get("created"),
        "model": manifest.get("model"),
        "answered_by": answered_by(llm, manifest.get("model"), manifest.get("provider")),
        "status": run.status(),
        "rounds": max((a["round"] for a in attempts), default=0),
        "attempts": len(attempts), "evals": sum(1 for e in events if e["type"] == "eval"),
        "best_speedup": max(accepted, default=None),
        "verified_speedup": (finished[-1]["best"] or {}).get("verified_speedup") if finished else None,
        "waits_for": (lambda p: f"{p['side']} {p['before']}" if p else None)(pending_request(run)),
        "llm_calls": len(llm), **spend(llm),
        "knowledge": (manifest.get("options") or {}).get("knowledge", "kb"),
    }


def spend(llm_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens and cost of a run's LLM calls (the ``data`` of its ``llm_call`` events): the one accounting
    that the live display, the loop's result and the report share."""
    return {"tokens": sum((d.get("usage") or {}).get("total_tokens", 0) for d in llm_calls),
            "cost_usd": round(sum(d.get("cost_usd", 0.0) for d in llm_calls), 6)}


def answered_by(llm_calls: list[dict[str, Any]], default: str | None, provider: str | None = None) -> str:
    """Who answered the run's LLM steps: the models that were asked and, for answers that came through
    the exchange, who wrote them (``"scripted agent (exchange)"``). Before any call: the configured model,
    or for a run answered through files (``provider`` exchange) that no answer has come yet."""
    seen: dict[str, int] = {}
    for call in llm_calls:
        who = (f"{call.get('answered_by') or 'unknown'} (exchange)" if call.get("provider") == "exchange"
               else f"{call.get('model') or default} ({call.get('provider') or 'openai'})")
        seen[who] = seen.get(who, 0) + 1
    if not seen:
        return "no answer yet (exchange)" if provider == "exchange" else f"{default} (no call yet)"
    return ", ".join(f"{who} x{n}" if len(seen) > 1 else who for who, n in seen.items())


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_report(run: Run) -> str:
    s = summary(run)
    events = run.log.events
    attempts = [e["data"] for e in events if e["type"] == "attempt"]
    plans = {e["step"].split(".")[0]: e["data"] for e in events if e["type"] == "plan"}
    finished = [e["data"] for e in events if e["type"] == "run_finished"]
    best = finished[-1]["best"] if finished else None
    lines = [f"# kernelskill run {s['id']}", "",
             f"- task: `{s['task']}`; answered by: {s['answered_by']}; status: **{s['status']}**",
             f"- rounds: {s['rounds']}; candidates evaluated: {s['evals']}; LLM calls: {s['llm_calls']}, "
             f"{s['tokens']} tokens, ${s['cost_usd']:.4f}"]
    if best:
        lines.append(f"- best: `{best['candidate']}` (round {best['round']}, method `{best['method'] or '-'}`): "
                     f"speedup **{_cell(best['speedup'])}x** over eager, re-verified on a fresh seed at "
                     f"{_cell(best['verified_speedup'])}x ({_cell(best['candidate_ms'])} ms vs "
                     f"{_cell(best['baseline_ms'])} ms); file `best.py`")
    elif finished:
        lines.append("- no candidate was correct and re-verified")
    if s["knowledge"] == "none":
        lines.append("- knowledge: **none** (ablation arm: no profile, no query; the planner chose freely, "
                     "without retrieved cases, methods or evidence)")
    lines += ["", "## Trajectory", "",
              "| round | branch | method | parent | result | speedup | parent next | planner | review |",
              "|---:|---|---|---|---|---:|---|---|---|"]
    for a in attempts:
        plan = plans.get(f"r{a['round']:02d}") if a["branch"] == "optimize" else None
        planner = "-"
        if plan:
            planner = f"asked {plan['asks']}x" + (", fallback to top permitted" if plan.get("fallback") else "")
            if plan.get("filtered"):
                planner += f", filtered {', '.join(plan['filtered'])}"
        lines.append("| " + " | ".join(_cell(v) for v in (
            a["round"], a["branch"], a.get("method"), a.get("parent"), a["result_class"], a.get("speedup"),
            "accepted" if a.get("accepted") else "kept", planner, a.get("review"))) + " |")
    repairs = [e["data"] for e in events if e["type"] == "diagnosis"]
    if repairs:
        lines += ["", "## Repairs", "", "| candidate | error class | root cause | fix |", "|---|---|---|---|"]
        for d in repairs:
            lines.append("| " + " | ".join(_cell(d.get(k)) for k in ("candidate", "error_class", "root_cause",
                                                                     "fix")) + " |")
    harness = [e for e in events if e["type"] in ("harness_failure", "harness_gave_up")]
    if harness:
        lines += ["", "## Harness failures (not the candidates' code)", "",
                  "| step | candidate | failure | stage | stage timings (s) |", "|---|---|---|---|---|"]
        for e in harness:
            d = e["data"]
            if e["type"] == "harness_gave_up":
                lines.append(f"| {e['step']} | - | run stopped after {d.get('failures')} in a row | "
                             f"{_cell(d.get('stage'))} | - |")
                continue
            timings = ", ".join(f"{k} {v:.1f}" for k, v in (d.get("stage_timings") or {}).items())
            lines.append("| " + " | ".join(_cell(v) for v in (e["step"], d.get("candidate"), d.get("status"),
                                                                d.get("stage"), timings)) + " |")
    return "\n".join(lines) + "\n"
