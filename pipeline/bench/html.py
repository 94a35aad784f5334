"""The suite report as one self-contained HTML page, on the run report's page shell
(:mod:`kernelskill.pipeline.runs.html`: inline CSS, a Content-Security-Policy that forbids every fetch,
sortable tables, the report embedded as JSON), so it opens the same offline, in a mail attachment or a
CI artifact.

Plots (inline SVG): the distribution of speedups (log2 bins, against eager and torch.compile), per-task
bars against both baselines (drawn here: the shell plots lines and points only), and the best speedup by
round (the shell's :func:`plot_svg`). Every figure's caption names the protocol, the baseline, the dtype,
the tolerance and the GPU.
"""

from __future__ import annotations

import html
import math
from typing import Any

from kernelskill.pipeline.runs.html import Series, nice_ticks, plot_svg, section, table_html
from kernelskill.pipeline.runs.html import page as shell_page

EAGER, COMPILE = "#3b6fb6", "#d9822b"
W, H, PAD_L, PAD_B, PAD_T, PAD_R = 720, 260, 56, 70, 16, 16


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _caption(labels: dict[str, str], what: str) -> str:
    return (f"<figcaption><b>{_esc(what)}</b><br>protocol {_esc(labels['protocol'])} &middot; baseline "
            f"{_esc(labels['baseline'])} &middot; dtype {_esc(labels['dtype'])} "
            f"&middot; tolerance {_esc(labels['tolerance'])} &middot; GPU {_esc(labels['gpu'])}</figcaption>")


#: a label's width per character at the plots' font sizes (an upper bound for a sans-serif face), in pixels
CHAR_W = 6.0
#: speedups on a log axis: 1, 2 and 5 times a power of ten
ROUND_SPEEDUPS = [m * 10.0 ** k for k in range(-4, 5) for m in (1, 2, 5)]


def _count_ticks(top: int) -> list[float]:
    """Whole counts from 0 in steps of 1, 2 or 5 times a power of ten, the last at or above ``top``."""
    return nice_ticks(0, max(1, top), target=min(6, max(1, top)))


def speedup_ticks(largest: float) -> list[float]:
    """Ticks of a log speedup axis symmetric about 1x: the axis ends at the first round value (1, 2 or 5
    times a power of ten) at or above ``largest`` (>= 2x), and its reciprocal, which is round too; at most
    eleven ticks (a longer axis keeps the powers of ten and its two ends)."""
    hi = next(v for v in ROUND_SPEEDUPS if v >= max(2.0, largest) * (1 - 1e-9))
    ticks = [v for v in ROUND_SPEEDUPS if 1 / hi * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
    if len(ticks) > 11:
        ticks = [v for v in ticks if v in (ticks[0], ticks[-1]) or abs(math.log10(v) - round(math.log10(v))) < 1e-9]
    return ticks


def _tick_label(value: float) -> str:
    return f"{value:g}"


def _axes(ticks: list[float], y_label: str) -> list[str]:
    """A linear y axis from 0 to the last tick, a grid line and label at each tick."""
    top = ticks[-1]
    out = [f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}" stroke="#333"/>',
           f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}" stroke="#333"/>',
           f'<text x="14" y="{(H - PAD_B + PAD_T) / 2}" transform="rotate(-90 14 {(H - PAD_B + PAD_T) / 2})" '
           f'font-size="11" text-anchor="middle">{_esc(y_label)}</text>']
    for v in ticks:
        y = H - PAD_B - (H - PAD_B - PAD_T) * v / top
        out.append(f'<line x1="{PAD_L - 4}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text class="y-tick" x="{PAD_L - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
                   f'{_tick_label(v)}</text>')
    return out


def _svg(parts: list[str], title: str, height: float = H, plot_id: str = "") -> str:
    ident = f' id="{_esc(plot_id)}"' if plot_id else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg"{ident} viewBox="0 0 {W} {height:.0f}" width="{W}" '
            f'height="{height:.0f}" role="img" aria-label="{_esc(title)}">' + "".join(parts) + "</svg>")


def _legend(x: float, y: float) -> list[str]:
    return [f'<rect x="{x}" y="{y}" width="10" height="10" fill="{EAGER}"/>',
            f'<text x="{x + 14}" y="{y + 9}" font-size="11">vs eager</text>',
            f'<rect x="{x + 80}" y="{y}" width="10" height="10" fill="{COMPILE}"/>',
            f'<text x="{x + 94}" y="{y + 9}" font-size="11">vs torch.compile</text>']


def histogram(tasks: list[dict[str, Any]]) -> str:
    """Correct tasks per log2 speedup bin (half-octaves), both baselines side by side."""
    edges = [2 ** (k / 2) for k in range(-8, 9)]  # 1/16x .. 16x
    bins = [(lo, hi) for lo, hi in zip(edges, edges[1:], strict=False)]

    def counts(key: str) -> list[int]:
        out = [0] * len(bins)
        for t in tasks:
            v = t.get(key)
            if t.get("correct") and isinstance(v, int | float) and v > 0:
                i = min(len(bins) - 1, max(0, int(math.floor((math.log2(v) + 4) * 2))))
                out[i] += 1
        return out

    ce, cc = counts("speedup"), counts("speedup_compile")
    ticks = _count_ticks(max([1, *ce, *cc]))  # whole tasks on every tick
    top = ticks[-1]
    slot = (W - PAD_L - PAD_R) / len(bins)
    parts = _axes(ticks, "tasks")
    for i, (lo, _hi) in enumerate(bins):
        x = PAD_L + i * slot
        for j, (count, color) in enumerate(((ce[i], EAGER), (cc[i], COMPILE))):
            h = (H - PAD_B - PAD_T) * count / top
            parts.append(f'<rect x="{x + 2 + j * (slot - 4) / 2:.1f}" y="{H - PAD_B - h:.1f}" '
                         f'width="{(slot - 4) / 2:.1f}" height="{h:.1f}" fill="{color}"><title>'
                         f'{_esc(f"{lo:.2g}x+: {count}")}</title></rect>')
        if i % 2 == 0:
            edge = f"1/{round(1 / lo)}" if lo < 1 else f"{lo:g}"  # whole octaves: 1/16x .. 8x, not 0.062x
            parts.append(f'<text x="{x:.1f}" y="{H - PAD_B + 14}" font-size="10" text-anchor="middle">{edge}x</text>')
    parts.append(f'<line x1="{PAD_L + 8 * slot:.1f}" y1="{PAD_T}" x2="{PAD_L + 8 * slot:.1f}" y2="{H - PAD_B}" '
                 'stroke="#900" stroke-dasharray="4 3"/>')
    parts += _legend(PAD_L, H - 24)
    return _svg(parts, "speedup distribution", plot_id="speedup-histogram")


def task_bars(tasks: list[dict[str, Any]]) -> str:
    """Best speedup per task on a log2 axis (1x at the baseline line), eager and torch.compile."""
    values = [max(v, 1 / v) for t in tasks for v in (t.get("speedup"), t.get("speedup_compile"))
              if isinstance(v, int | float) and v > 0]
    ticks = speedup_ticks(max([1.0, *values]))
    span = math.log2(ticks[-1])
    n = max(1, len(tasks))
    slot = (W - PAD_L - PAD_R) / n
    names = [str(t["task"]) for t in tasks] if n <= 40 else []
    # the task names stand upright under their bars, whole (the level prefix too): the plot grows downwards
    pad_b = max(PAD_B, 14 + CHAR_W * max([0, *map(len, names)]))
    height = H - PAD_B + pad_b
    mid = PAD_T + (H - PAD_B - PAD_T) / 2
    scale = (H - PAD_B - PAD_T) / 2 / span
    parts = [f'<line x1="{PAD_L}" y1="{mid}" x2="{W - PAD_R}" y2="{mid}" stroke="#333"/>',
             f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}" stroke="#333"/>']
    for v in ticks:
        y = mid - math.log2(v) * scale
        parts.append(f'<text class="y-tick" x="{PAD_L - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
                     f'{_tick_label(v)}x</text>')
        if v != 1:
            parts.append(f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" stroke="#eee"/>')
    for i, t in enumerate(tasks):
        x = PAD_L + i * slot
        for j, (key, color) in enumerate((("speedup", EAGER), ("speedup_compile", COMPILE))):
            v = t.get(key)
            if not (t.get("correct") and isinstance(v, int | float) and v > 0):
                continue
            h = math.log2(v) * scale
            y, hh = (mid - h, h) if h >= 0 else (mid, -h)
            parts.append(f'<rect x="{x + 1 + j * max(1.0, (slot - 2) / 2):.1f}" y="{y:.1f}" '
                         f'width="{max(1.0, (slot - 2) / 2):.1f}" height="{max(hh, 0.5):.1f}" fill="{color}">'
                         f'<title>{_esc(t["task"])}: {v:.3f}x vs {"eager" if j == 0 else "torch.compile"}</title></rect>')
        if not t.get("correct"):
            parts.append(f'<text x="{x + slot / 2:.1f}" y="{mid - 3}" font-size="9" fill="#900" '
                         f'text-anchor="middle">x<title>{_esc(t["task"])}: {_esc(t.get("failure"))}</title></text>')
        if names:
            lx, ly = x + slot / 2 + 3, H - PAD_B + 6
            parts.append(f'<text class="task-label" x="{lx:.1f}" y="{ly}" font-size="9" text-anchor="end" '
                         f'transform="rotate(-90 {lx:.1f} {ly})">{_esc(names[i])}</text>')
    parts += _legend(W - 260, 4)
    return _svg(parts, "per-task speedup", height, plot_id="task-bars")


def round_line(by_round: list[dict[str, Any]]) -> str:
    """Geometric mean of the best speedup so far (over the tasks correct by then), per round."""
    rows = [r for r in by_round if r.get("geomean")]
    series = Series("geomean best so far", [(float(r["round"]), float(r["geomean"])) for r in rows],
                    labels=[f"round {r['round']}: {r['geomean']:.3f}x over {r['correct']} correct tasks" for r in rows])
    return plot_svg([series], title="best speedup by round", x_label="round", y_label="geomean best speedup (x)",
                    hlines=[(1.0, "1x (eager)")], integer_x=True, plot_id="by-round")


def _tables(report: dict[str, Any]) -> str:
    groups = [("overall", report["overall"])] + [(f"level {k}", v) for k, v in report["levels"].items()]
    ps = report["p_values"]
    columns = ["group", "baseline", "tasks", "correct", *(f"fast_{p:g}" for p in ps), "geomean", "median"]
    rows = []
    for name, s in groups:
        for base, key, gm, med in (("eager", "fast_p_eager", "geomean_speedup", "median_speedup"),
                                   ("torch.compile", "fast_p_compile", "geomean_speedup_compile",
                                    "median_speedup_compile")):
            rows.append([name, base, s["tasks"], s["correctness_rate"], *s[key].values(), s[gm], s[med]])
    return table_html(columns, rows, table_id="fast-p")


def _task_table(report: dict[str, Any]) -> str:
    columns = ["task", "status", "correct", "vs eager", "vs torch.compile", "best round", "final pick vs eager",
               "failure", "tokens", "cost"]
    rows, classes = [], []
    for t in report["tasks"]:
        failure = t.get("failure") or ""
        if t.get("error"):
            failure += ": " + " ".join(str(t["error"]).split())[:200]
        rows.append([t["task"], t["status"], t["correct"], t["speedup"], t["speedup_compile"], t["best_round"],
                     t.get("final_speedup"), failure or None, t["tokens"], t["cost_usd"]])
        classes.append("" if t["correct"] else "failed")
    return table_html(columns, rows, table_id="tasks", row_classes=classes)


def _figure(svg: str, caption: str) -> str:
    return f'<figure style="margin:12px 0 24px">{svg}{caption}</figure>'


def page(report: dict[str, Any]) -> str:
    lab = report["labels"]
    o = report["overall"]
    failures = ", ".join(f"{k} {v}" for k, v in o["failures"].items()) or "none"
    final = (f"; the runs' own re-verified final picks: geomean {o['final_geomean_speedup']:.3f}x against eager "
             f"over {o['final_picks']} tasks" if o.get("final_picks") and o.get("final_geomean_speedup") else "")
    subtitle = (f"{o['tasks']} tasks, {o['correct']} correct{final}; failure classes: {failures}; tokens {o['tokens']}, "
                f"cost ${o['cost_usd']:.4f}. Protocol {lab['protocol']}; precision {lab.get('precision', 'fp32')}; "
                f"baseline {lab['baseline']}; dtype "
                f"{lab['dtype']}; tolerance {lab['tolerance']}; GPU {lab['gpu']}.")
    figures = "".join([
        _figure(histogram(report["tasks"]), _caption(lab, "Speedup distribution of the correct tasks (best "
                                                          "candidate per task; log2 bins; dashed line: 1x)")),
        _figure(task_bars(report["tasks"]), _caption(lab, "Best speedup per task against eager and against "
                                                          "torch.compile (log2 axis; x: no correct candidate)")),
        _figure(round_line(o["by_round"]), _caption(lab, "Best speedup so far by round: geometric mean over the "
                                                         "tasks correct by that round (dashed line: 1x over eager)")),
    ])
    sections = [section("fast_p, geomean and median speedup", _tables(report), section_id="fast-p-section"),
                section("Plots", figures, section_id="plots")]
    if report.get("search_rounds"):  # the suite ran as a search: what each round made over the tasks
        sections.append(section("Search rounds", table_html(
            ["round", "tasks", "candidates", "correct", "geomean of round bests", "methods that paid (tasks)"],
            [[r["round"], r["tasks"], r["candidates"], r["correct"], r["geomean_best"],
              ", ".join(f"{m} {n}" for m, n in r["paid"].items()) or None] for r in report["search_rounds"]],
            table_id="search-rounds"), section_id="search-rounds-section"))
    sections.append(section("Per task", _task_table(report), section_id="tasks-section"))
    return shell_page(f"kernelskill suite {report['suite']}", sections, subtitle=subtitle, data=report,
                      footer="kernelskill bench report")
