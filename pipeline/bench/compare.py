"""Two suites side by side, task by task: an ablation (``--knowledge kb`` against ``--knowledge none``) or a
search against a single path (``--candidates 4 --frontier 2`` against ``1/1``).

Tasks are matched by their name in the suite (``L2/12_Gemm_Multiply_LeakyReLU``); each side's line is the
suite report's own :func:`~kernelskill.pipeline.bench.report.task_row`, so the figures are the ones
``bench report`` prints. The summary counts the tasks where one arm's best correct speedup beats the other's
by more than ``tie`` (a relative margin: timing noise on the H200 is a few per cent), and the geometric
means over the tasks both arms got correct.

What each arm needed to reach the other's final speed (the ablation's cost question): for a task both suites
ran where the other arm has a correct best (its ``speedup``, the figure the wins compare), this arm's log is
read in order and the first evaluation that counts for the best (correct, ``ok``, not turned down by a
re-verification: the report's own rule, :func:`~kernelskill.pipeline.bench.report.counted_speedup`) with a
speedup of at least ``other / (1 + tie)`` is where it reached it; ``gpu_s_to_other`` and
``llm_calls_to_other`` are what the arm had spent up to and including that evaluation (evaluations' workers
and profiles, as the report's ``gpu_s``), ``gpu_share_to_other`` that over the other arm's whole ``gpu_s``.
None where it never got there. One difference from the order the run lived in: a candidate that a later
re-verification turned down does not count as reaching, although the run did not know that yet.

The summary, per arm, is the median of that share over the tasks (a task never reached counts as +inf, so
the median says "not reached" when most were not; a task whose other arm has no GPU seconds, or whose own arm
did not run, is left out and counted). The criterion the ablation names is a median of at most
:data:`CRITERION`. Where a cost or a total leaves out profiles recorded without seconds
(``profiles_unmeasured``), the figures are lower bounds; the summary counts those tasks. With
``--upto-round N`` every figure is as both arms stood after round N: the other's final is its best by then,
and the spend its spend by then.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from kernelskill.pipeline.bench.report import geomean

#: relative difference of two best speedups below which a task counts as a tie
TIE = 0.03


#: the ablation's criterion: on the median task, the other arm's final speed reached with at most this share
#: of the GPU seconds the other arm spent
CRITERION = 0.5

#: the fields of a task row each side shows
SIDE = ("status", "correct", "speedup", "speedup_compile", "best_round", "verified", "failure", "evals", "tokens",
        "llm_calls", "answer_chars", "gpu_s", "eval_s", "profile_s", "profiles_unmeasured")
#: what each side's line adds about reaching the other arm's final speed (:func:`reach`)
REACH = ("reached_other", "round_to_other", "gpu_s_to_other", "llm_calls_to_other", "gpu_share_to_other",
         "profiles_unmeasured_to_other")
#: a task the suite does not have (``correct`` None: "not run", not a failure)
ABSENT = {k: None for k in SIDE + REACH} | {"status": "not in this suite", "evals": 0, "tokens": 0,
                                            "llm_calls": 0, "answer_chars": 0, "profiles_unmeasured": 0}


def _side(row: dict[str, Any] | None) -> dict[str, Any]:
    return dict(ABSENT) if row is None else {k: row.get(k) for k in SIDE} | {k: None for k in REACH}


def _ran(row: dict[str, Any]) -> bool:
    """Did the suite run this task at all (a run that started; not a task file it could not read)?"""
    return row.get("status") not in ("not started", "not in this suite") and row.get("failure") != "bad_input"


def reach(row: dict[str, Any], other: dict[str, Any], *, tie: float = TIE) -> dict[str, Any]:
    """The :data:`REACH` figures of ``row`` (a task row with its ``best_path``) against ``other``'s final
    speed; all None where the other arm has no correct best or this arm did not run."""
    out: dict[str, Any] = {k: None for k in REACH}
    final = other.get("speedup")
    if not (isinstance(final, int | float) and final > 0 and _ran(row)):
        return out
    need = final / (1 + tie)
    point = next((p for p in row.get("best_path") or [] if p["speedup"] >= need), None)
    out["reached_other"] = point is not None
    if point is not None:
        total = other.get("gpu_s")
        out.update(round_to_other=point["round"], gpu_s_to_other=point["gpu_s"],
                   llm_calls_to_other=point["llm_calls"], profiles_unmeasured_to_other=point["profiles_unmeasured"],
                   gpu_share_to_other=round(point["gpu_s"] / total, 6) if total else None)
    return out


def reach_summary(tasks: list[dict[str, Any]], side: str) -> dict[str, Any]:
    """Over the tasks both arms ran where the other arm has a correct best: on how many ``side`` reached it,
    and the median share of the other's GPU seconds it needed (+inf for a task not reached; ``median_share``
    None and ``median_not_reached`` True when that median is +inf)."""
    other = "b" if side == "a" else "a"
    considered = [t for t in tasks if t["in_both"] and t[side]["reached_other"] is not None]
    shares: list[float] = []
    unknown_total, lower_bound = 0, 0
    for t in considered:
        mine, theirs = t[side], t[other]
        if not theirs["gpu_s"]:
            unknown_total += 1  # the other arm's GPU seconds are 0 or unknown: no share to take
            continue
        if not mine["reached_other"]:
            shares.append(math.inf)
            continue
        shares.append(mine["gpu_share_to_other"])
        lower_bound += bool(mine["profiles_unmeasured_to_other"] or theirs["profiles_unmeasured"])
    median = statistics.median(shares) if shares else None
    return {"tasks": len(considered), "reached": sum(1 for t in considered if t[side]["reached_other"]),
            "median_share": round(median, 6) if median is not None and math.isfinite(median) else None,
            "median_not_reached": median is not None and not math.isfinite(median),
            "shares": len(shares), "other_gpu_s_unknown": unknown_total, "unmeasured_profiles": lower_bound,
            "meets_criterion": None if median is None else median <= CRITERION}


def compare(a: dict[str, Any], b: dict[str, Any], *, tie: float = TIE) -> dict[str, Any]:
    """``a`` and ``b`` are :func:`suite_report` dicts; one row per task that either suite has."""
    rows_a = {r["task"]: r for r in a["tasks"]}
    rows_b = {r["task"]: r for r in b["tasks"]}
    names = list(rows_a) + [n for n in rows_b if n not in rows_a]
    tasks: list[dict[str, Any]] = []
    wins = {"a": 0, "b": 0, "tie": 0}
    for name in names:
        ra, rb = rows_a.get(name), rows_b.get(name)
        row = {"task": name, "level": (ra or rb or {}).get("level"), "a": _side(ra), "b": _side(rb),
               "in_both": ra is not None and rb is not None, "winner": None, "ratio": None}
        sa, sb = row["a"]["speedup"], row["b"]["speedup"]
        if ra is not None and rb is not None:
            row["a"].update(reach(ra, rb, tie=tie))
            row["b"].update(reach(rb, ra, tie=tie))
        if row["in_both"]:
            if sa and sb:
                row["ratio"] = round(sa / sb, 6)
                row["winner"] = "tie" if abs(sa / sb - 1) <= tie else ("a" if sa > sb else "b")
            elif sa or sb:
                row["winner"] = "a" if sa else "b"  # only one arm got a correct candidate
            if row["winner"]:
                wins[row["winner"]] += 1
        tasks.append(row)
    both = [t for t in tasks if t["in_both"] and t["a"]["speedup"] and t["b"]["speedup"]]

    def mean(side: str, key: str) -> float | None:
        values = [t[side][key] for t in both if t[side][key]]
        return None if len(values) != len(both) else geomean(values)

    def spent(key: str, digits: int | None = None) -> dict[str, Any]:
        """A spend over the tasks both suites ran (an arm's other tasks are not part of the comparison)."""
        totals = {s: sum(t[s][key] or 0 for t in tasks if t["in_both"]) for s in ("a", "b")}
        return totals if digits is None else {s: round(v, digits) for s, v in totals.items()}

    return {"a": {"suite": a["suite"], "options": a.get("options", {}), "labels": a.get("labels", {})},
            "b": {"suite": b["suite"], "options": b.get("options", {}), "labels": b.get("labels", {})},
            "tie": tie, "tasks": tasks, "wins": wins, "common_correct": len(both),
            "geomean": {"a": mean("a", "speedup"), "b": mean("b", "speedup")},
            "geomean_compile": {"a": mean("a", "speedup_compile"), "b": mean("b", "speedup_compile")},
            "upto_round": a.get("upto_round"),
            "llm_calls": spent("llm_calls"), "gpu_s": spent("gpu_s", 1), "profile_s": spent("profile_s", 1),
            "profiles_unmeasured": spent("profiles_unmeasured"),
            "reach": {"a": reach_summary(tasks, "a"), "b": reach_summary(tasks, "b"), "criterion": CRITERION},
            "tokens": spent("tokens")}


def _x(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _gpu(side: dict[str, Any]) -> str:
    """A side's GPU seconds; "≥" where profiles recorded without seconds are not in them."""
    return ("≥" if side.get("profiles_unmeasured") and side["gpu_s"] is not None else "") + _s(side["gpu_s"])


def reach_cell(side: dict[str, Any]) -> str:
    """What a side spent to reach the other's final speed: "GPU s, LLM calls, share of the other's GPU s"."""
    if side.get("reached_other") is None:
        return "-"
    if not side["reached_other"]:
        return "not reached"
    share = side["gpu_share_to_other"]
    calls = side["llm_calls_to_other"]
    return (f"{'≥' if side['profiles_unmeasured_to_other'] else ''}{side['gpu_s_to_other']:.0f} s, "
            f"{calls} call{'' if calls == 1 else 's'}, {'-' if share is None else f'{share:.2f}'}")


def reach_line(c: dict[str, Any], side: str) -> str:
    """"A reached B's final speed on N of M tasks; median share of B's GPU seconds A needed: 0.42 (...)"."""
    me, other = side.upper(), ("B" if side == "a" else "A")
    r = c["reach"][side]
    median = ("not reached" if r["median_not_reached"] else "-" if r["median_share"] is None
              else f"{r['median_share']:.2f}")
    line = (f"{me} reached {other}'s final speed on {r['reached']} of {r['tasks']} tasks; median share of "
            f"{other}'s GPU seconds {me} needed: {median} (the criterion is <= {c['reach']['criterion']:g})")
    notes = []
    if r["other_gpu_s_unknown"]:
        notes.append(f"{r['other_gpu_s_unknown']} task(s) left out of the median: {other}'s GPU seconds unknown")
    if r["unmeasured_profiles"]:
        notes.append(f"on {r['unmeasured_profiles']} task(s) a figure leaves out profiles recorded without seconds")
    return line + (f"; {'; '.join(notes)}." if notes else ".")


def markdown(c: dict[str, Any]) -> str:
    a, b = c["a"]["suite"], c["b"]["suite"]
    labels = c["a"]["labels"]
    lines = [f"# {a} against {b}", ""]
    if c.get("upto_round") is not None:
        lines += [f"As both stood after round {c['upto_round']} (events of later rounds, and the final "
                  "re-verification, left out).", ""]
    if labels:
        lines += ["; ".join(f"{k} {v}" for k, v in labels.items()), ""]
    lines += [
        f"Best correct speedup per task (A = `{a}`, B = `{b}`); a task is a tie when the two differ by "
        f"{c['tie']:.0%} or less.", "",
        "| task | A correct | A vs eager | A vs compile | A round | B correct | B vs eager | B vs compile | B round "
        "| A/B | winner | A calls | B calls | A GPU s | B GPU s | A to reach B (GPU s, calls, share) "
        "| B to reach A (GPU s, calls, share) |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    def ok(side: dict[str, Any]) -> str:
        return "not run" if side["correct"] is None else "yes" if side["correct"] else "no"

    for t in c["tasks"]:
        ta, tb = t["a"], t["b"]
        lines.append(
            f"| {t['task']} | {ok(ta)} | {_x(ta['speedup'])} | {_x(ta['speedup_compile'])} "
            f"| {'-' if ta['best_round'] is None else ta['best_round']} | {ok(tb)} "
            f"| {_x(tb['speedup'])} | {_x(tb['speedup_compile'])} | {'-' if tb['best_round'] is None else tb['best_round']} "
            f"| {_ratio(t['ratio'])} | {t['winner'] or '-'} "
            f"| {ta['llm_calls'] or 0} | {tb['llm_calls'] or 0} | {_gpu(ta)} | {_gpu(tb)} "
            f"| {reach_cell(ta)} | {reach_cell(tb)} |")
    w = c["wins"]
    lines += ["", f"A better on {w['a']} task(s), B better on {w['b']}, tie on {w['tie']}. Over the "
              f"{c['common_correct']} task(s) both got correct: geomean vs eager A {_x(c['geomean']['a'])}, "
              f"B {_x(c['geomean']['b'])}; vs torch.compile A {_x(c['geomean_compile']['a'])}, "
              f"B {_x(c['geomean_compile']['b'])}. Over the tasks both ran: LLM calls A {c['llm_calls']['a']}, "
              f"B {c['llm_calls']['b']}; "
              f"GPU seconds (evaluation workers and profiles) A {c['gpu_s']['a']:.0f} (profiles "
              f"{c['profile_s']['a']:.0f}), B {c['gpu_s']['b']:.0f} (profiles {c['profile_s']['b']:.0f})"
              + (f", leaving out {c['profiles_unmeasured']['a']} profile(s) of A and "
                 f"{c['profiles_unmeasured']['b']} of B recorded without seconds"
                 if any(c["profiles_unmeasured"].values()) else "")
              + f"; tokens A {c['tokens']['a']}, B {c['tokens']['b']} (answers through the exchange count no "
              "tokens).", "",
              f"To reach the other's final speed (its best correct speedup, within {c['tie']:.0%}): the GPU seconds "
              "and LLM calls an arm spent up to the first evaluation that got there, and their share of the other "
              "arm's GPU seconds.", "", reach_line(c, "a"), "", reach_line(c, "b"), ""]
    return "\n".join(lines)


__all__ = ["CRITERION", "TIE", "compare", "markdown", "reach", "reach_line", "reach_summary"]
