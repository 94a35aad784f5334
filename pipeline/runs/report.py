"""A run at a glance (:func:`summary`) and its markdown report."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kernelskill.pipeline.runs import html as page
from kernelskill.pipeline.runs.events import TASK
from kernelskill.pipeline.runs.final import final_pick
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
    pick = final_pick(events) if finished else None
    return {
        "id": run.id, "task": manifest.get("task_name", TASK), "created": manifest.get("created"),
        "model": manifest.get("model"),
        "answered_by": answered_by(llm, manifest.get("model"), manifest.get("provider")),
        "status": run.status(),
        "rounds": max((a["round"] for a in attempts), default=0),
        "attempts": len(attempts), "evals": sum(1 for e in events if e["type"] == "eval"),
        "best_speedup": max(accepted, default=None),
        # what the run delivers: its final pick at its re-verification's speedup (the one number every view shows)
        "verified_speedup": pick["speedup"] if pick else None,
        "verified_speedup_ci": pick["speedup_ci"] if pick else None,
        "waits_for": (lambda p: f"{p['side']} {p['before']}" if p else None)(pending_request(run)),
        "llm_calls": len(llm), **spend(llm),
        "knowledge": (manifest.get("options") or {}).get("knowledge", "kb"),
        "precision": run.precision,  # the dtype the task was evaluated in (fp32 for runs made before the setting)
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
    plans_by_parent = {(e["round"], e["data"].get("parent")): e["data"] for e in events if e["type"] == "plan"}
    finished = [e["data"] for e in events if e["type"] == "run_finished"]
    best = finished[-1]["best"] if finished else None
    lines = [f"# kernelskill run {s['id']}", "",
             f"- task: `{s['task']}`; precision: {s['precision']}; answered by: {s['answered_by']}; "
             f"status: **{s['status']}**",
             f"- rounds: {s['rounds']}; candidates evaluated: {s['evals']}; LLM calls: {s['llm_calls']}, "
             f"{s['tokens']} tokens, ${s['cost_usd']:.4f}"]
    pick = final_pick(events) if best else None
    if best and pick:
        ci = pick.get("speedup_ci")
        lines.append(f"- final pick: `{pick['candidate']}` (round {pick['round']}, method `{pick['method'] or '-'}`): "
                     f"**{_cell(pick['speedup'])}x** over eager"
                     + (f" (95 % interval {_cell(ci[0])}-{_cell(ci[1])}x)" if ci else "")
                     + f", measured by its re-verification on a fresh seed ({_cell(pick['candidate_ms'])} ms vs "
                     f"{_cell(pick['baseline_ms'])} ms); {_cell(pick['found_speedup'])}x in its round; file `best.py`")
    elif finished:
        lines.append("- no candidate was correct and re-verified")
    if s["knowledge"] == "none":
        lines.append("- knowledge: **none** (ablation arm: no profile, no query; the planner chose freely, "
                     "without retrieved cases, methods or evidence)")
    lines += ["", "## Trajectory", "",
              "| round | branch | method | parent | result | speedup (95 % interval) | parent next | planner | review |",
              "|---:|---|---|---|---|---:|---|---|---|"]
    intervals = {e["data"].get("candidate"): _interval_text((e["data"].get("result") or {}).get("speedup_ci"))
                 for e in events if e["type"] == "eval" and not str(e["step"]).startswith("verify")}
    for a in attempts:
        plan = (plans_by_parent.get((a["round"], a.get("parent"))) or plans.get(f"r{a['round']:02d}")
                if a["branch"] == "optimize" else None)  # a search plans once per frontier member
        planner = "-"
        if plan:
            planner = f"asked {plan['asks']}x" + (", fallback to top permitted" if plan.get("fallback") else "")
            if plan.get("filtered"):
                planner += f", filtered {', '.join(plan['filtered'])}"
        lines.append("| " + " | ".join(_cell(v) for v in (
            a["round"], a["branch"], a.get("method"), a.get("parent"), a["result_class"],
            _with_interval(a.get("speedup"), intervals.get(a.get("candidate"))),
            "accepted" if a.get("accepted") else "kept", planner, a.get("review"))) + " |")
    rounds = round_rows(run)
    if rounds:
        lines += ["", "## Rounds", "", "| round | candidates | correct | best | methods that paid | frontier after |",
                  "|---:|---:|---:|---:|---|---|"]
        for row in rounds:
            lines.append("| " + " | ".join(_cell(v) for v in (
                row["round"], row["candidates"], row["correct"], row["best"], ", ".join(row["paid"]),
                ", ".join(row["frontier"]))) + " |")
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


def round_rows(run: Run) -> list[dict[str, Any]]:
    """Per round of a search (several candidates per round; the loop's ``round`` notes): candidates, correct
    ones, the round's best speedup, the methods that paid (accepted) and the frontier after it. Empty for a
    single-path run."""
    out = []
    for e in run.log.of_type("round"):
        d = e["data"]
        out.append({"round": d.get("round"), "candidates": d.get("candidates"), "correct": d.get("correct"),
                    "best": d.get("best"), "paid": list(d.get("paid") or []),
                    "frontier": [Path(f["candidate"]).stem + (f" ({f['speedup']:.2f}x)" if f.get("speedup") else "")
                                 for f in d.get("frontier") or []]})
    return out


# The HTML page ------------------------------------------------------------------------------------
def candidate_rows(run: Run) -> list[dict[str, Any]]:
    """Every candidate of a run, in the order evaluated: its round, step, branch, method, status, speedup,
    timings (candidate and eager baseline median and IQR, build seconds), whether it was accepted, and the
    re-verified speedup of the best one. From the ``attempt`` and ``eval`` events alone."""
    events = run.log.events
    evals: dict[str, dict[str, Any]] = {}
    verified: dict[str, float | None] = {}
    for e in events:
        if e["type"] != "eval":
            continue
        cand = e["data"].get("candidate")
        result = e["data"].get("result") or {}
        if str(e["step"]).startswith("verify"):
            verified[cand] = result.get("speedup")
        else:
            evals[cand] = result
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for e in events:
        if e["type"] != "attempt":
            continue
        a = e["data"]
        seen.add(a["candidate"])
        rows.append(_row(a["round"], a.get("step") or e["step"], a["candidate"], a.get("branch"), a.get("method"),
                         a.get("result_class"), a.get("speedup"), evals.get(a["candidate"]) or {}, a.get("accepted"),
                         verified.get(a["candidate"]), a.get("review")))
    for cand, result in evals.items():  # evaluated, not yet judged (a paused run)
        if cand not in seen:
            step = next((e["step"] for e in events if e["type"] == "eval" and e["data"].get("candidate") == cand), "")
            rows.append(_row(next((e["round"] for e in events if e["step"] == step), None), step, cand, None, None,
                             result.get("status"), result.get("speedup"), result, None, verified.get(cand), None))
    return rows


def _row(round_: Any, step: str, cand: str, branch: Any, method: Any, status: Any, speedup: Any,
         result: dict[str, Any], accepted: Any, verified: Any, review: Any) -> dict[str, Any]:
    details = result.get("details") or {}
    return {"round": round_, "step": step, "candidate": cand, "branch": branch, "method": method, "status": status,
            "speedup": speedup, "candidate_ms": result.get("candidate_ms"),
            "candidate_iqr_ms": result.get("candidate_iqr_ms"), "baseline_ms": result.get("baseline_ms"),
            "baseline_iqr_ms": result.get("baseline_iqr_ms"), "compile_ms": result.get("compile_ms"),
            "build_s": details.get("build_seconds"), "accepted": accepted, "verified_speedup": verified,
            "speedup_ci": _interval_text(result.get("speedup_ci")), "review": review}


def _with_interval(speedup: Any, interval: str | None) -> Any:
    return f"{speedup} ({interval})" if interval and speedup is not None else speedup


def _interval_text(ci: Any) -> str | None:
    """A speedup's 95 % interval as ``lo-hi`` (None when the harness gave none)."""
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(v, int | float) for v in ci):
        return f"{ci[0]:.3f}-{ci[1]:.3f}"
    return None


def report_data(run: Run) -> dict[str, Any]:
    """What the HTML report shows, as JSON: the run's summary, its candidates and the best speedup so far
    after each round."""
    rows = candidate_rows(run)
    best_so_far: list[dict[str, Any]] = []
    best = None
    for r in sorted((r for r in rows if r["round"] is not None), key=lambda r: r["round"]):
        if r["accepted"] and r["speedup"] is not None:
            best = r["speedup"] if best is None else max(best, r["speedup"])
        if best is not None:
            if best_so_far and best_so_far[-1]["round"] == r["round"]:
                best_so_far[-1]["speedup"] = best
            else:
                best_so_far.append({"round": r["round"], "speedup": best})
    return {"summary": summary(run), "candidates": rows, "best_so_far": best_so_far, "rounds": round_rows(run)}


def html_report(run: Run, data: dict[str, Any] | None = None) -> str:
    """A self-contained page: the speedup of every candidate by round (and the best so far), the summary, and
    a table of every candidate with its status, timings and method."""
    data = data or report_data(run)
    s, rows = data["summary"], data["candidates"]
    plotted = [r for r in rows if r["round"] is not None]

    def label(r: dict[str, Any]) -> str:
        what = f"{r['speedup']:.3f}x" if r["speedup"] is not None else str(r["status"])
        return f"round {r['round']} {r['step']} ({r['method'] or r['branch'] or '-'}): {what}"

    groups = [("accepted", "#16a34a", "o", [r for r in plotted if r["accepted"] and r["speedup"] is not None]),
              ("correct, not accepted", "#2563eb", "o",
               [r for r in plotted if not r["accepted"] and r["speedup"] is not None]),
              ("failed (shown at 0)", "#dc2626", "x", [r for r in plotted if r["speedup"] is None])]
    series = [page.Series("best so far", [(b["round"], b["speedup"]) for b in data["best_so_far"]], style="step",
                          color="#4b5563", dashed=True)]
    series += [page.Series(name, [(r["round"], r["speedup"] or 0.0) for r in group], style="points", color=color,
                           marker=marker, labels=[label(r) for r in group]) for name, color, marker, group in groups
               if group]
    plot = page.plot_svg(series, title="speedup over eager PyTorch, by round", x_label="round",
                         y_label="speedup (x over eager)", hlines=[(1.0, "eager (1x)")], integer_x=True,
                         plot_id="speedup-plot")
    facts = [("run", s["id"]), ("task", s["task"]), ("precision", s.get("precision", "fp32")), ("status", s["status"]),
             ("answered by", s["answered_by"]),
             ("rounds", s["rounds"]), ("candidates evaluated", s["evals"]), ("LLM calls", s["llm_calls"]),
             ("tokens", s["tokens"]), ("cost (USD)", s["cost_usd"]), ("best speedup", s["best_speedup"]),
             ("re-verified speedup", s["verified_speedup"])]
    if s.get("waits_for"):
        facts.append(("waits for", s["waits_for"]))
    fields = [("round", "round"), ("step", "step"), ("branch", "branch"), ("method", "method"),
              ("status", "status"), ("speedup", "speedup"), ("95 % interval", "speedup_ci"),
              ("candidate ms", "candidate_ms"), ("IQR ms", "candidate_iqr_ms"), ("eager ms", "baseline_ms"), ("torch.compile ms", "compile_ms"),
              ("build s", "build_s"), ("accepted", "accepted"), ("re-verified", "verified_speedup"),
              ("review", "review")]
    optional = {"compile_ms", "build_s", "verified_speedup", "speedup_ci"}  # shown when some candidate has one
    fields = [(c, k) for c, k in fields if k not in optional or any(r[k] is not None for r in rows)]
    table = page.table_html([c for c, _ in fields], [[r[k] for _, k in fields] for r in rows],
                            table_id="candidates", digits=4, detail="review",
                            row_classes=["accepted" if r["accepted"] else "failed" if r["speedup"] is None else ""
                                         for r in rows])
    sections = [page.section("Summary", page.summary_html(facts), section_id="summary"),
                page.section("Speedup by round", plot, section_id="speedup")]
    if data.get("rounds"):  # a search: what each round made
        sections.append(page.section("Rounds", page.table_html(
            ["round", "candidates", "correct", "best", "methods that paid", "frontier after"],
            [[r["round"], r["candidates"], r["correct"], r["best"], ", ".join(r["paid"]), ", ".join(r["frontier"])]
             for r in data["rounds"]], table_id="rounds", digits=3), section_id="rounds-section"))
    sections.append(page.section("Candidates", table, section_id="candidates-section"))
    return page.page(f"kernelskill run {s['id']}", sections,
        subtitle=f"task {s['task']}; {s['status']}", data=data,
        footer="kernelskill: every number comes from the run's events.jsonl; candidate ms and eager ms are "
               "medians of the timed trials, IQR their interquartile range.")
