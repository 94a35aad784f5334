"""The suite report: what a suite adds up to, per level and overall, computed from its runs' event logs
alone (every number can be recomputed from ``runs/*/events.jsonl``).

Per task: the best correct candidate (an ``eval`` event with status ``ok``, not a re-verification, of a
candidate that did not fail its re-verification), its speedup over eager and over torch.compile
(``compile_ms / candidate_ms`` when the harness timed the compiled baseline), the round it came from;
for a task with no correct candidate its failure class (the last evaluation's status, or why the task
could not run). Per group: correctness rate, failure classes, fast_p (the share of ALL tasks of the group
that are correct and faster than ``p`` times the baseline, KernelBench's definition), geometric mean and
median speedup over the correct tasks, the best speedup by round, tokens and cost.

The best correct candidate is the best the search FOUND; what a user of the run GETS is the loop's own final
pick (its ``run_finished`` event: the best candidate the reviewer accepted, re-verified on a fresh seed). The
two differ when the reviewer turned a faster candidate down (a gain within noise) or its re-verification
failed; each task row and each group therefore also carry the final pick's re-verified speedups
(``final_speedup``, ``final_speedup_compile``) and their geometric means.

GPU time (``gpu_s``) is what the run kept the GPU busy: its evaluations' harness workers
(``details.worker_seconds``, re-verifications included; ``eval_s``) plus its profiles' recorded seconds
(``profile_s``; an Nsight Compute profile takes longer than an evaluation, and only some ablation arms
profile). A profile recorded before profiles carried seconds is counted in ``profiles_unmeasured``, never
guessed: where it is not 0, ``gpu_s`` is a lower bound. The torch.compile baseline an evaluation may have
measured first (``details.timing.compile.measured_now``, its worker's seconds in
``details.timing.compile.measured.worker_seconds``) is NOT charged to the run: it is measured once per task
and GPU and shared by every run and arm of that task, so charging it to whichever run came first would make
one arm look dearer by chance. ``best_path`` is the run's best correct speedup as it rose, each step with the
GPU seconds and LLM calls spent up to and including that evaluation (what ``bench compare`` reads to say
what an arm needed to reach the other's final speed).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

from kernelskill.pipeline.bench.suite import Suite
from kernelskill.pipeline.runs import Run
from kernelskill.pipeline.runs.final import final_pick
from kernelskill.pipeline.runs.gpu_side import SKIPPED_PROFILE
from kernelskill.pipeline.runs.report import round_rows, spend
from kernelskill.protocols import load_protocol

P_VALUES = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def _speedup_vs_compile(result: dict[str, Any]) -> float | None:
    details = result.get("details") or {}
    value = details.get("speedup_vs_compile")
    if isinstance(value, int | float) and value > 0:
        return float(value)
    comp, cand = result.get("compile_ms"), result.get("candidate_ms")
    if isinstance(comp, int | float) and isinstance(cand, int | float) and cand > 0 and comp > 0:
        return float(comp) / float(cand)
    return None


def task_row(entry: dict[str, Any], run: Run | None, *, upto_round: int | None = None) -> dict[str, Any]:
    """One task's line of the report, from its manifest entry and its run's events; with ``upto_round``, from
    the run as it stood when that round ended (two arms compared after the same number of rounds): the
    events of rounds up to it, recorded before the first event of a later round. A re-verification carries
    no round; it counts only where it came before the later rounds (a run verified after round N, then
    resumed for more), never where it re-measured a later round's candidate."""
    row: dict[str, Any] = {"task": entry["name"], "level": entry.get("level"), "run": entry.get("run_id"),
                           "correct": False, "speedup": None, "speedup_compile": None, "best_round": None,
                           "best_candidate": None, "failure": None, "status": "failed", "error": entry.get("error"),
                           "evals": 0, "tokens": 0, "cost_usd": 0.0, "by_round": {}, "dtype": None, "gpu": None,
                           "protocol": None, "baseline": None, "verified": False, "rounds": [], "gpu_s": None,
                           "final_candidate": None, "final_speedup": None, "final_speedup_compile": None,
                           "eval_s": None, "profile_s": None, "profiles": 0, "profiles_unmeasured": 0,
                           "best_path": []}
    if entry.get("error"):
        row["failure"] = "bad_input"
        return row
    if run is None:
        row.update(status="not started", failure="not_started")
        return row
    manifest = run.manifest
    harness = manifest.get("harness") or {}
    row["protocol"] = manifest.get("protocol") or harness.get("protocol")
    row["precision"] = harness.get("precision") or "fp32"  # a run made before the setting ran in fp32
    row["baseline"] = harness.get("baseline", "eager")
    events = run.log.events
    types = [e["type"] for e in events]
    if upto_round is not None:
        later = next((i for i, e in enumerate(events) if int(e.get("round") or 0) > upto_round), len(events))
        events = [e for e in events[:later] if int(e.get("round") or 0) <= upto_round]
        row["upto_round"] = upto_round
    done = "run_finished" in types or any(e.get("step") == "solution.eval" for e in events)  # bench eval: one step
    row["status"] = ("finished" if done else "paused" if types and types[-1] == "run_paused"
                     else "failed" if types and types[-1] == "run_error" else "incomplete")
    errors = [e["data"].get("error") for e in events if e["type"] == "run_error"]
    if errors and row["status"] == "failed":
        row["error"] = errors[-1]
    llm = [e["data"] for e in events if e["type"] == "llm_call"]
    row.update(spend(llm))  # tokens and cost_usd: the run report's one accounting
    # answers through the exchange carry no token count: how many calls, and how much was read and written
    row.update(llm_calls=len(llm), answer_chars=sum(len(str(d.get("text") or "")) for d in llm),
               prompt_chars=sum(len(str(m.get("content", ""))) for d in llm for m in d.get("messages") or []
                                if isinstance(m, dict)))
    row["rounds"] = [r for r in round_rows(run)  # a search's rounds (candidates, correct, best, methods that paid)
                     if upto_round is None or int(r.get("round") or 0) <= upto_round]
    row.update(gpu_seconds(events))  # eval_s + profile_s = gpu_s, and the profiles recorded without seconds
    evals = [e for e in events if e["type"] == "eval"]
    plain: list[dict[str, Any]] = []
    passed: list[dict[str, Any]] = []  # re-verifications on a fresh seed that held
    failed_verify: set[Any] = set()  # candidates a re-verification turned down
    for e in evals:
        if not (e["step"] or "").startswith("verify."):
            plain.append(e)
        elif (e["data"].get("result") or {}).get("correct"):
            passed.append(e)
        else:
            failed_verify.add(e["data"].get("candidate"))
    row["evals"] = len(plain)
    row["best_path"] = best_path(events, failed_verify)
    best: dict[str, Any] | None = None
    for e in plain:
        result = e["data"].get("result") or {}
        details = result.get("details") or {}
        row["dtype"] = row["dtype"] or details.get("task_dtype")
        row["gpu"] = row["gpu"] or details.get("gpu_name")
        speed = counted_speedup(e, failed_verify)
        if speed is None:
            continue
        r = int(e.get("round") or 0)
        row["by_round"][r] = max(row["by_round"].get(r, 0.0), float(speed))
        if best is None or speed > best["speedup"]:
            best = {"speedup": float(speed), "round": r, "candidate": e["data"].get("candidate"),
                    "compile": _speedup_vs_compile(result)}
    verified = {e["data"].get("candidate") for e in passed}
    _final_pick(row, events, passed)
    if best is not None:
        row.update(correct=True, speedup=round(best["speedup"], 6), best_round=best["round"],
                   best_candidate=best["candidate"], verified=best["candidate"] in verified,
                   speedup_compile=None if best["compile"] is None else round(best["compile"], 6))
    else:
        last = (plain[-1]["data"].get("result") or {}).get("status") if plain else None
        row["failure"] = last or ("run_error" if row["status"] == "failed" else "no_candidate")
    return row


def event_gpu_seconds(event: dict[str, Any]) -> float | None:
    """The GPU seconds an event stands for: an evaluation's harness worker (``details.worker_seconds``; the
    torch.compile baseline worker it may have started, ``details.timing.compile.measured``, is not in it), a
    profile's recorded ``seconds``, 0.0 for a profile skipped on purpose; None for an event that names none (a
    build that failed ran no worker; a profile recorded before profiles carried seconds is unknown) and for
    every other event."""
    data = event.get("data") or {}
    if event.get("type") == "eval":
        value = ((data.get("result") or {}).get("details") or {}).get("worker_seconds")
    elif event.get("type") == "profile":
        value = data.get("seconds")
        if value is None and data.get("message") == SKIPPED_PROFILE:
            return 0.0  # the GPU side was told to skip it: nothing ran
    else:
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def gpu_seconds(events: list[dict[str, Any]]) -> dict[str, Any]:
    """``eval_s`` (the evaluations' workers), ``profile_s`` (the profiles'), ``gpu_s`` (both), each None when no
    event names any seconds (``profile_s`` is 0.0 for a run that profiled nothing), ``profiles`` and
    ``profiles_unmeasured`` (recorded without seconds: ``gpu_s`` and ``profile_s`` are then lower bounds)."""
    evals = [s for e in events if e["type"] == "eval" and (s := event_gpu_seconds(e)) is not None]
    profiles = [e for e in events if e["type"] == "profile"]
    measured = [s for e in profiles if (s := event_gpu_seconds(e)) is not None]
    eval_s = round(sum(evals), 3) if evals else None
    profile_s = round(sum(measured), 3) if measured or not profiles else None
    known = [v for v in (eval_s, profile_s if measured else None) if v is not None]
    return {"eval_s": eval_s, "profile_s": profile_s, "gpu_s": round(sum(known), 3) if known else None,
            "profiles": len(profiles), "profiles_unmeasured": len(profiles) - len(measured)}


def counted_speedup(event: dict[str, Any], failed_verify: set[Any]) -> float | None:
    """The speedup an evaluation counts for in the best correct candidate: a plain evaluation (not a
    re-verification), ``ok`` and correct, of a candidate no re-verification turned down; else None."""
    if event.get("type") != "eval" or str(event.get("step") or "").startswith("verify."):
        return None
    data = event.get("data") or {}
    result = data.get("result") or {}
    speed = result.get("speedup")
    if (result.get("status") != "ok" or not result.get("correct") or data.get("candidate") in failed_verify
            or not isinstance(speed, int | float) or isinstance(speed, bool)):
        return None
    return float(speed)


def best_path(events: list[dict[str, Any]], failed_verify: set[Any]) -> list[dict[str, Any]]:
    """Each evaluation that raised the best counted speedup (:func:`counted_speedup`), in the log's order, with
    what the run had spent up to and including it: ``gpu_s`` (:func:`event_gpu_seconds` summed),
    ``llm_calls`` and ``profiles_unmeasured`` (profiles so far without seconds: ``gpu_s`` is then a lower
    bound). Its last entry is the row's best. A candidate a later re-verification turned down is left out
    here as in the best, although the run did not know it yet when it was measured."""
    out: list[dict[str, Any]] = []
    gpu, calls, unmeasured, best = 0.0, 0, 0, None
    for e in events:
        if e["type"] == "llm_call":
            calls += 1
        if e["type"] not in ("eval", "profile"):
            continue
        seconds = event_gpu_seconds(e)
        gpu += seconds or 0.0
        unmeasured += e["type"] == "profile" and seconds is None
        speed = counted_speedup(e, failed_verify)
        if speed is not None and (best is None or speed > best):
            best = speed
            out.append({"seq": e.get("seq"), "step": e.get("step"), "round": int(e.get("round") or 0),
                        "speedup": round(speed, 6), "gpu_s": round(gpu, 3), "llm_calls": calls,
                        "profiles_unmeasured": unmeasured})
    return out


def _final_pick(row: dict[str, Any], events: list[dict[str, Any]], passed: list[dict[str, Any]]) -> None:
    """The loop's own final pick with the speedups of its passed re-verification, read through
    :func:`~kernelskill.pipeline.runs.final.final_pick` so that this report, ``runs list``, ``runs report`` and
    the HTML show the same number for the same candidate."""
    pick = final_pick(events)
    if pick is None:
        return
    candidate = pick["candidate"]
    row["final_candidate"] = candidate
    checks = [e for e in passed if e["data"].get("candidate") == candidate]
    if checks:
        compile_ = _speedup_vs_compile(checks[-1]["data"].get("result") or {})
        row["final_speedup"] = pick["speedup"]
        row["final_speedup_ci"] = pick["speedup_ci"]
        row["final_speedup_compile"] = None if compile_ is None else round(compile_, 6)


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0]
    return round(math.exp(sum(math.log(v) for v in values) / len(values)), 6) if values else None


def fast_p(rows: list[dict[str, Any]], key: str) -> dict[str, float | None]:
    """KernelBench's fast_p: correct and ``speedup > p``, over every task of the group."""
    if not rows:
        return {str(p): None for p in P_VALUES}
    out = {}
    for p in P_VALUES:
        hits = sum(1 for r in rows if r["correct"] and isinstance(r[key], int | float) and r[key] > p)
        out[str(p)] = round(hits / len(rows), 6)
    return out


def by_round(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each round: how many tasks had a correct candidate by then, and the geometric mean of their
    best speedup so far."""
    last = max((r for row in rows for r in row["by_round"]), default=-1)
    out = []
    for rnd in range(last + 1):
        bests = []
        for row in rows:
            seen = [v for r, v in row["by_round"].items() if r <= rnd]
            if seen:
                bests.append(max(seen))
        out.append({"round": rnd, "correct": len(bests), "geomean": geomean(bests),
                    "best": round(max(bests), 6) if bests else None})
    return out


def search_rounds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per round over the tasks run as a search: candidates, correct ones, the geometric mean of each task's
    best of that round, and how often each method paid (was accepted). Empty for single-path suites."""
    per: dict[int, dict[str, Any]] = {}
    for row in rows:
        for r in row.get("rounds") or []:
            agg = per.setdefault(r["round"], {"round": r["round"], "tasks": 0, "candidates": 0, "correct": 0,
                                              "bests": [], "paid": Counter()})
            agg["tasks"] += 1
            agg["candidates"] += r["candidates"] or 0
            agg["correct"] += r["correct"] or 0
            if r.get("best"):
                agg["bests"].append(r["best"])
            agg["paid"].update(r.get("paid") or [])
    return [{"round": a["round"], "tasks": a["tasks"], "candidates": a["candidates"], "correct": a["correct"],
             "geomean_best": geomean(a["bests"]), "paid": dict(a["paid"].most_common())}
            for _, a in sorted(per.items())]


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    correct = [r for r in rows if r["correct"]]
    eager = [r["speedup"] for r in correct]
    comp = [r["speedup_compile"] for r in correct if r["speedup_compile"] is not None]
    return {
        "tasks": len(rows), "correct": len(correct),
        "correctness_rate": round(len(correct) / len(rows), 6) if rows else None,
        "failures": dict(Counter(r["failure"] for r in rows if not r["correct"])),
        "fast_p_eager": fast_p(rows, "speedup"), "fast_p_compile": fast_p(rows, "speedup_compile"),
        "compile_timed": len(comp),
        "geomean_speedup": geomean(eager), "median_speedup": round(statistics.median(eager), 6) if eager else None,
        "geomean_speedup_compile": geomean(comp),
        "median_speedup_compile": round(statistics.median(comp), 6) if comp else None,
        "mean_best_round": round(statistics.mean(r["best_round"] for r in correct), 3) if correct else None,
        "by_round": by_round(rows),
        "tokens": sum(r["tokens"] for r in rows), "cost_usd": round(sum(r["cost_usd"] for r in rows), 6),
        "llm_calls": sum(r.get("llm_calls", 0) for r in rows),
        # what the runs deliver: their final picks, re-verified (tasks without one are left out)
        "final_picks": sum(1 for r in rows if r.get("final_speedup")),
        "final_geomean_speedup": geomean([r["final_speedup"] for r in rows if r.get("final_speedup")]),
        "final_geomean_speedup_compile": geomean([r["final_speedup_compile"] for r in rows
                                                  if r.get("final_speedup_compile")]),
    }


def _labels(rows: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, str]:
    """What every figure names: protocol, precision, baseline, dtype, tolerance, GPU (all values seen)."""

    def seen(key: str, fallback: str) -> str:
        values = sorted({str(r[key]) for r in rows if r.get(key)})
        return ", ".join(values) if values else fallback

    protocol_name = seen("protocol", str(options.get("protocol") or "strict"))
    tolerances = []
    for name in protocol_name.split(", "):
        try:
            proto = load_protocol(name)
        except Exception:  # noqa: BLE001 - a protocol file that is not here any more: name it only
            tolerances.append(f"{name}: see its file")
            continue
        for dtype in sorted({str(r["dtype"]) for r in rows if r.get("dtype")} or {"fp32"}):
            full = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(dtype, dtype)
            atol, rtol = proto.tolerance(full)
            tolerances.append(f"{dtype} atol={atol:g} rtol={rtol:g}")
    timed = seen("baseline", str(options.get("baseline") or "eager"))
    baseline = "eager and torch.compile" if "compile" in timed else "eager (torch.compile not timed)"
    return {"protocol": protocol_name, "precision": seen("precision", str(options.get("precision") or "fp32")),
            "baseline": baseline,
            "dtype": seen("dtype", "unknown"), "tolerance": "; ".join(tolerances), "gpu": seen("gpu", "unknown")}


def result_details(event: dict[str, Any]) -> dict[str, Any]:
    """The ``details`` of an eval or profile event's result (an eval keeps its result whole, a profile only the
    provenance part of its details), or an empty dict."""
    data = event.get("data") or {}
    found = (data.get("result") or {}).get("details") if event.get("type") == "eval" else data.get("details")
    return found if isinstance(found, dict) else {}


def devices(runs: list[Run | None]) -> list[dict[str, Any]]:
    """GPU results per (evaluator, device) over the runs' recorded evals and profiles, with the tries run
    again because a worker died (``details.attempts`` - 1; results from before the provenance count as
    ``unknown``)."""
    counts: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        if run is None:
            continue
        for e in run.log.events:
            if e["type"] not in ("eval", "profile"):
                continue
            details = result_details(e)
            key = (str(details.get("evaluator") or "unknown"), str(details.get("device") or "unknown"))
            row = counts.setdefault(key, {"evaluator": key[0], "device": key[1], "evals": 0, "profiles": 0,
                                          "retries": 0})
            row["evals" if e["type"] == "eval" else "profiles"] += 1
            attempts = details.get("attempts")
            row["retries"] += max(0, int(attempts) - 1) if isinstance(attempts, int) else 0
    return sorted(counts.values(), key=lambda r: (r["evaluator"], r["device"]))


def suite_report(suite: Suite, *, upto_round: int | None = None) -> dict[str, Any]:
    """The report of ``suite``; with ``upto_round``, as it stood after that round (see :func:`task_row`)."""
    manifest = suite.manifest
    pairs = suite.runs()
    rows = [task_row(entry, run, upto_round=upto_round) for entry, run in pairs]
    levels = sorted({r["level"] for r in rows if r["level"] is not None})
    return {"suite": suite.path.name, "kind": manifest.get("kind"), "created": manifest.get("created"),
            "options": manifest.get("options", {}), "labels": _labels(rows, manifest.get("options", {})),
            "overall": summarize(rows), "levels": {str(lv): summarize([r for r in rows if r["level"] == lv])
                                                   for lv in levels},
            "tasks": rows, "p_values": list(P_VALUES), "search_rounds": search_rounds(rows),
            "upto_round": upto_round, "devices": devices([run for _e, run in pairs]), "sessions": suite.sessions}


# markdown -------------------------------------------------------------------------------------------
def _f(value: Any, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}{suffix}"
    return f"{value}{suffix}"


def markdown(report: dict[str, Any]) -> str:
    lab = report["labels"]
    lines = [f"# kernelskill suite {report['suite']}", "",
             f"Protocol {lab['protocol']}; precision {lab.get('precision', 'fp32')}; baselines: {lab['baseline']}; dtype "
             f"{lab['dtype']}; tolerance {lab['tolerance']}; GPU {lab['gpu']}.", ""]
    groups = [("overall", report["overall"])] + [(f"level {k}", v) for k, v in report["levels"].items()]
    head = "| group | tasks | correct | " + " | ".join(f"fast_{p:g}" for p in report["p_values"])
    lines += ["## fast_p against eager", "", head + " | geomean | median |",
              "|---|---:|---:|" + "---:|" * (len(report["p_values"]) + 2)]
    for name, s in groups:
        lines.append(f"| {name} | {s['tasks']} | {_f(s['correctness_rate'])} | "
                     + " | ".join(_f(v) for v in s["fast_p_eager"].values())
                     + f" | {_f(s['geomean_speedup'], 'x')} | {_f(s['median_speedup'], 'x')} |")
    lines += ["", "## fast_p against torch.compile", "", head + " | geomean | median | timed |",
              "|---|---:|---:|" + "---:|" * (len(report["p_values"]) + 3)]
    for name, s in groups:
        lines.append(f"| {name} | {s['tasks']} | {_f(s['correctness_rate'])} | "
                     + " | ".join(_f(v) for v in s["fast_p_compile"].values())
                     + f" | {_f(s['geomean_speedup_compile'], 'x')} | {_f(s['median_speedup_compile'], 'x')} | "
                     f"{s['compile_timed']} |")
    o = report["overall"]
    if o.get("final_picks"):
        lines += ["", f"The runs' own final picks (the best candidate each loop accepted, re-verified on a fresh "
                  f"seed; {o['final_picks']} of {o['tasks']} tasks): geomean {_f(o['final_geomean_speedup'], 'x')} "
                  f"against eager, {_f(o['final_geomean_speedup_compile'], 'x')} against torch.compile. The "
                  "tables above count the best correct candidate found."]
    lines += ["", "## Per task", "", "| task | status | correct | vs eager | vs compile | best round | "
              "final pick vs eager | failure | LLM calls | tokens | cost |",
              "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in report["tasks"]:
        failure = r["failure"] or ""
        if r.get("error"):
            failure = f"{failure}: {' '.join(str(r['error']).split())[:160]}"
        lines.append(f"| {r['task']} | {r['status']} | {'yes' if r['correct'] else 'no'} | {_f(r['speedup'], 'x')} | "
                     f"{_f(r['speedup_compile'], 'x')} | {_f(r['best_round'])} | {_f(r.get('final_speedup'), 'x')} | "
                     f"{failure.replace('|', '/')} | "
                     f"{r.get('llm_calls', 0)} | {r['tokens']} | ${r['cost_usd']:.4f} |")
    if report.get("search_rounds"):
        lines += ["", "## Search rounds", "", "| round | tasks | candidates | correct | geomean of round bests | "
                  "methods that paid (tasks) |", "|---:|---:|---:|---:|---:|---|"]
        for r in report["search_rounds"]:
            paid = ", ".join(f"{m} {n}" for m, n in r["paid"].items()) or "-"
            lines.append(f"| {r['round']} | {r['tasks']} | {r['candidates']} | {r['correct']} | "
                         f"{_f(r['geomean_best'], 'x')} | {paid} |")
    if any(d["evaluator"] != "unknown" for d in report.get("devices") or []):  # suites from before: no line
        lines += ["", "GPU results per device: " + "; ".join(
            f"{d['evaluator']} on {d['device']}: {d['evals']} evals, {d['profiles']} profiles"
            + (f", {d['retries']} retried after a worker died" if d["retries"] else "")
            for d in report["devices"]) + "."]
    lines += ["", f"Failure classes: {', '.join(f'{k} {v}' for k, v in o['failures'].items()) or 'none'}. "
              f"Mean best round {_f(o['mean_best_round'])}. LLM calls {o.get('llm_calls', 0)}, tokens {o['tokens']}, "
              f"cost ${o['cost_usd']:.4f}" + (" (answers through the exchange count no tokens)."
                                               if o.get("llm_calls") and not o["tokens"] else "."), ""]
    return "\n".join(lines)
