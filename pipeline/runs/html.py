"""Self-contained HTML pages with plots as inline SVG: no network, no CDN, one file that opens anywhere.

The building blocks take plain data and return HTML text; a caller composes them into :func:`page`::

    svg = plot_svg([Series("speedup", [(0, 1.1), (1, 1.9)], style="line+points")],
                   title="speedup by round", x_label="round", y_label="x over eager", hlines=[(1.0, "eager")])
    body = [section("Speedup", svg), section("Candidates", table_html(["round", "speedup"], [[0, 1.1]]))]
    html = page("run r1", body, data={"rows": [...]})

- :func:`plot_svg`: axes with round-number ticks, grid, one or more series (line, step line, points), dashed
  reference lines and a legend; every point is a ``<circle>`` (or a cross for ``marker="x"``) carrying
  ``data-series``, ``data-x``, ``data-y`` and a ``<title>`` tooltip, so its numbers can be read back.
- :func:`table_html`: a table whose cells keep the raw value in ``data-value``; columns sort on click.
- :func:`summary_html`: a definition list of key facts.
- :func:`page`: the document: inline CSS and JS, a Content-Security-Policy that forbids every fetch,
  and ``data`` embedded as JSON (``<script type="application/json" id="page-data">``).

Standard library only.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

PALETTE = ("#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#4b5563")


@dataclass
class Series:
    """One series of a plot. ``style``: ``line``, ``step`` (a staircase, e.g. best so far; no markers),
    ``points``, or ``line+points``; ``marker``: ``o`` (circle) or ``x`` (cross, e.g. failed candidates);
    ``labels``: a tooltip per point."""

    name: str
    points: list[tuple[float, float]]
    style: str = "line+points"
    color: str | None = None
    marker: str = "o"
    dashed: bool = False
    labels: list[str] = field(default_factory=list)


def finite(data: Any) -> Any:
    """``data`` with every NaN or infinity replaced by None (JSON has no such numbers)."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite(v) for v in data]
    return data


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round-number ticks covering ``[lo, hi]`` (steps of 1, 2 or 5 times a power of ten)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    value = start
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _fmt(value: float) -> str:
    return f"{value:g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


def plot_svg(series: Sequence[Series], *, title: str, x_label: str, y_label: str, width: int = 720,
             height: int = 360, hlines: Sequence[tuple[float, str]] = (), y_from_zero: bool = True,
             integer_x: bool = False, plot_id: str = "plot") -> str:
    """An SVG line/point plot of ``series`` with axes, ticks, grid, ``hlines`` (value, label) and a legend."""
    left, right, top, bottom = 64, 20, 36, 64
    pw, ph = width - left - right, height - top - bottom
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points] + [v for v, _ in hlines]
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y_lo, y_hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if y_from_zero:
        y_lo = min(0.0, y_lo)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    x_ticks = nice_ticks(x_lo, x_hi)
    if integer_x:
        x_ticks = [t for t in x_ticks if float(t).is_integer()] or x_ticks
    y_ticks = nice_ticks(y_lo, y_hi * 1.05 if y_hi > 0 else y_hi)
    x0, x1 = min(x_ticks[0], x_lo), max(x_ticks[-1], x_hi)
    y0, y1 = y_ticks[0], y_ticks[-1]

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - (y - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="{esc(plot_id)}" class="plot" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{esc(title)}">',
           f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" class="plot-title">{esc(title)}</text>']
    for t in y_ticks:
        out.append(f'<line class="grid" x1="{left}" x2="{left + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}"/>'
                   f'<text class="tick" x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in x_ticks:
        out.append(f'<line class="grid" y1="{top}" y2="{top + ph}" x1="{px(t):.1f}" x2="{px(t):.1f}"/>'
                   f'<text class="tick" x="{px(t):.1f}" y="{top + ph + 16}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(f'<rect class="frame" x="{left}" y="{top}" width="{pw}" height="{ph}"/>')
    out.append(f'<text class="axis-label" x="{left + pw / 2:.1f}" y="{height - 24}" text-anchor="middle">'
               f'{esc(x_label)}</text>')
    out.append(f'<text class="axis-label" transform="translate(16 {top + ph / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{esc(y_label)}</text>')
    for value, label in hlines:
        out.append(f'<line class="ref" x1="{left}" x2="{left + pw}" y1="{py(value):.1f}" y2="{py(value):.1f}"/>'
                   f'<text class="ref-label" x="{left + pw - 4}" y="{py(value) - 4:.1f}" text-anchor="end">'
                   f'{esc(label)}</text>')
    legend_x = left
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        pts = sorted(s.points) if s.style in ("line", "step", "line+points") else s.points
        if s.style in ("line", "line+points") and len(pts) > 1:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            out.append(f'<polyline class="series-line" data-series="{esc(s.name)}" points="{path}" fill="none" '
                       f'stroke="{color}" stroke-width="2"{dash}/>')
        if s.style == "step" and pts:
            coords = [(px(pts[0][0]), py(pts[0][1]))]
            for (_, ya), (xb, yb) in zip(pts, pts[1:], strict=False):
                coords += [(px(xb), py(ya)), (px(xb), py(yb))]
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in coords)
            out.append(f'<polyline class="series-line" data-series="{esc(s.name)}" points="{path}" fill="none" '
                       f'stroke="{color}" stroke-width="2"{dash}/>')
        if s.style in ("points", "line+points"):
            for j, (x, y) in enumerate(s.points):
                tip = s.labels[j] if j < len(s.labels) else f"{s.name}: {_fmt(x)}, {_fmt(y)}"
                attrs = f'class="point" data-series="{esc(s.name)}" data-x="{x!r}" data-y="{y!r}"'
                cx, cy = px(x), py(y)
                if s.marker == "x":
                    out.append(f'<g {attrs}><title>{esc(tip)}</title><path d="M{cx - 5:.1f},{cy - 5:.1f} '
                               f'L{cx + 5:.1f},{cy + 5:.1f} M{cx - 5:.1f},{cy + 5:.1f} L{cx + 5:.1f},{cy - 5:.1f}" '
                               f'stroke="{color}" stroke-width="2.5"/></g>')
                else:
                    out.append(f'<circle {attrs} cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" fill="{color}">'
                               f'<title>{esc(tip)}</title></circle>')
        out.append(f'<g class="legend-item"><rect x="{legend_x}" y="{height - 14}" width="12" height="4" '
                   f'fill="{color}"/><text class="legend" x="{legend_x + 16}" y="{height - 9}">{esc(s.name)}</text></g>')
        legend_x += 28 + 7 * len(s.name)
    out.append("</svg>")
    return "\n".join(out)


def _cell(value: Any, digits: int) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table_html(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, table_id: str = "table",
               caption: str | None = None, digits: int = 3, row_classes: Sequence[str] = (),
               detail: str | None = None) -> str:
    """A sortable table; a cell shows its value formatted and keeps the raw value in ``data-value``.

    ``detail`` names a column of prose (a reviewer's verdict): it is not squeezed into a column of its own but
    shown under its row across the whole table width (a row ``tr.detail``; sorting keeps it with its row)."""
    shown = [c for c in columns if c != detail]
    out = [f'<div class="scroll"><table id="{esc(table_id)}" class="data">']
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f'<th data-col="{esc(c)}">{esc(c)}</th>' for c in shown) + "</tr></thead>")
    out.append("<tbody>")
    for i, row in enumerate(rows):
        classes = [row_classes[i]] if i < len(row_classes) and row_classes[i] else []
        values = dict(zip(columns, row, strict=True))
        prose = values.get(detail) if detail else None
        cells = []
        for col in shown:
            value = values[col]
            raw = "" if value is None else (json.dumps(value) if not isinstance(value, str) else value)
            num = " num" if isinstance(value, int | float) and not isinstance(value, bool) else ""
            cells.append(f'<td class="c{num}" data-col="{esc(col)}" data-value="{esc(raw)}">'
                         f"{esc(_cell(value, digits))}</td>")
        cls = " ".join(classes + (["has-detail"] if prose else []))
        out.append(f"<tr{f' class={chr(34)}{esc(cls)}{chr(34)}' if cls else ''}>" + "".join(cells) + "</tr>")
        if prose:
            out.append(f'<tr class="{esc(" ".join([*classes, "detail"]))}"><td colspan="{len(shown)}" '
                       f'data-col="{esc(detail)}" data-value="{esc(prose)}"><span class="detail-label">'
                       f"{esc(detail)}:</span> {esc(prose)}</td></tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def summary_html(items: Sequence[tuple[str, Any]]) -> str:
    """Key facts as a definition list (``data-key`` on each value)."""
    return ('<dl class="summary">' + "".join(f'<dt>{esc(k)}</dt><dd data-key="{esc(k)}">{esc(_cell(v, 3))}</dd>'
                                             for k, v in items) + "</dl>")


def section(title: str, body: str, *, section_id: str | None = None) -> str:
    ident = f' id="{esc(section_id)}"' if section_id else ""
    return f"<section{ident}><h2>{esc(title)}</h2>\n{body}\n</section>"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1200px;
padding:0 16px;color:#111827;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb}
.sub{color:#4b5563;margin:0 0 12px}
dl.summary{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}
dl.summary dt{color:#4b5563}dl.summary dd{margin:0;font-variant-numeric:tabular-nums;word-break:break-word}
.scroll{overflow-x:auto}table.data{border-collapse:collapse;font-variant-numeric:tabular-nums}
table.data td{max-width:28em}
table.data th,table.data td{border-bottom:1px solid #e5e7eb;padding:4px 8px;text-align:left;vertical-align:top}
table.data th{cursor:pointer;background:#f9fafb;position:sticky;top:0}
table.data td.num{text-align:right}table.data tr.failed td{color:#991b1b}
table.data tr.accepted td:first-child{border-left:3px solid #16a34a}
table.data tr.has-detail td{border-bottom:none}
table.data tr.detail td{max-width:none;padding:0 8px 8px 24px;color:#374151;font-size:13px}
table.data tr.detail .detail-label{color:#6b7280}
svg.plot{max-width:100%;height:auto;background:#fff}
svg .grid{stroke:#eef0f3}svg .frame{fill:none;stroke:#9ca3af}svg .tick,svg .legend{font-size:11px;fill:#4b5563}
svg .axis-label{font-size:12px;fill:#111827}svg .plot-title{font-size:14px;font-weight:600;fill:#111827}
svg .ref{stroke:#6b7280;stroke-dasharray:4 4}svg .ref-label{font-size:11px;fill:#6b7280}
footer{margin-top:32px;color:#6b7280;font-size:12px}
"""

JS = """
document.querySelectorAll('table.data').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.filter.call(body.rows, function (r) { return !r.classList.contains('detail'); });
      rows.forEach(function (r) {  // a row's prose line (tr.detail) moves with it
        var next = r.nextElementSibling;
        r.detailRow = next && next.classList.contains('detail') ? next : null;
      });
      var asc = th.getAttribute('data-sort') !== 'asc';
      table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-sort'); });
      th.setAttribute('data-sort', asc ? 'asc' : 'desc');
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-value'), y = b.cells[col].getAttribute('data-value');
        var nx = parseFloat(x), ny = parseFloat(y), r;
        if (!isNaN(nx) && !isNaN(ny)) { r = nx - ny; } else { r = String(x).localeCompare(String(y)); }
        return asc ? r : -r;
      });
      rows.forEach(function (row) { body.appendChild(row); if (row.detailRow) { body.appendChild(row.detailRow); } });
    });
  });
});
"""

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "connect-src 'none'; font-src 'none'; base-uri 'none'; form-action 'none'")


def page(title: str, sections: Sequence[str], *, subtitle: str = "", data: Any = None, footer: str = "") -> str:
    """A complete HTML document: everything inline, nothing fetched (the CSP forbids it)."""
    payload = ""
    if data is not None:  # "</" never appears inside the JSON, so it cannot close the script element
        text = json.dumps(finite(data), sort_keys=True, default=str, allow_nan=False).replace("</", "<\\/")
        payload = f'<script type="application/json" id="page-data">{text}</script>'
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
        f"<h1>{esc(title)}</h1>", f'<p class="sub">{esc(subtitle)}</p>' if subtitle else "",
        *sections, f"<footer>{esc(footer)}</footer>" if footer else "", payload, f"<script>{JS}</script>",
        "</body>", "</html>", ""])
