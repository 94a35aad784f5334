"""Two suites side by side, task by task: an ablation (``--knowledge kb`` against ``--knowledge none``) or a
search against a single path (``--candidates 4 --frontier 2`` against ``1/1``).

Tasks are matched by their name in the suite (``L2/12_Gemm_Multiply_LeakyReLU``); each side's line is the
suite report's own :func:`~kernelskill.pipeline.bench.report.task_row`, so the figures are the ones
``bench report`` prints. The summary counts the tasks where one arm's best correct speedup beats the other's
by more than ``tie`` (a relative margin: timing noise on the H200 is a few per cent), and the geometric
means over the tasks both arms got correct.
"""

from __future__ import annotations

from typing import Any

from kernelskill.pipeline.bench.report import geomean

#: relative difference of two best speedups below which a task counts as a tie
TIE = 0.03


#: the fields of a task row each side shows
SIDE = ("status", "correct", "speedup", "speedup_compile", "best_round", "verified", "failure", "evals", "tokens",
        "llm_calls", "answer_chars", "gpu_s")
#: a task the suite does not have (``correct`` None: "not run", not a failure)
ABSENT = {k: None for k in SIDE} | {"status": "not in this suite", "evals": 0, "tokens": 0, "llm_calls": 0,
                                    "answer_chars": 0}


def _side(row: dict[str, Any] | None) -> dict[str, Any]:
    return dict(ABSENT) if row is None else {k: row.get(k) for k in SIDE}


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

    return {"a": {"suite": a["suite"], "options": a.get("options", {}), "labels": a.get("labels", {})},
            "b": {"suite": b["suite"], "options": b.get("options", {}), "labels": b.get("labels", {})},
            "tie": tie, "tasks": tasks, "wins": wins, "common_correct": len(both),
            "geomean": {"a": mean("a", "speedup"), "b": mean("b", "speedup")},
            "geomean_compile": {"a": mean("a", "speedup_compile"), "b": mean("b", "speedup_compile")},
            "upto_round": a.get("upto_round"),
            # spend over the tasks both suites ran (an arm's other tasks are not part of the comparison)
            "llm_calls": {s: sum(t[s]["llm_calls"] or 0 for t in tasks if t["in_both"]) for s in ("a", "b")},
            "gpu_s": {s: round(sum(t[s]["gpu_s"] or 0 for t in tasks if t["in_both"]), 1) for s in ("a", "b")},
            "tokens": {s: sum(t[s]["tokens"] or 0 for t in tasks if t["in_both"]) for s in ("a", "b")}}


def _x(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


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
        "| A/B | winner | A calls | B calls | A GPU s | B GPU s |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
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
            f"| {ta['llm_calls'] or 0} | {tb['llm_calls'] or 0} | {_s(ta['gpu_s'])} | {_s(tb['gpu_s'])} |")
    w = c["wins"]
    lines += ["", f"A better on {w['a']} task(s), B better on {w['b']}, tie on {w['tie']}. Over the "
              f"{c['common_correct']} task(s) both got correct: geomean vs eager A {_x(c['geomean']['a'])}, "
              f"B {_x(c['geomean']['b'])}; vs torch.compile A {_x(c['geomean_compile']['a'])}, "
              f"B {_x(c['geomean_compile']['b'])}. Over the tasks both ran: LLM calls A {c['llm_calls']['a']}, "
              f"B {c['llm_calls']['b']}; "
              f"GPU seconds (the harness's workers) A {c['gpu_s']['a']:.0f}, B {c['gpu_s']['b']:.0f}; "
              f"tokens A {c['tokens']['a']}, B {c['tokens']['b']} (answers through the exchange count no tokens).",
              ""]
    return "\n".join(lines)


__all__ = ["TIE", "compare", "markdown"]
