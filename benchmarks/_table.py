"""Plain-text tables for the benchmark scripts (stdout, readable in a pipe or a results file)."""

from __future__ import annotations


def table(title: str, header: list[str], rows: list[list[object]], digits: int = 3) -> str:
    """``title``, a header line, a rule and one line per row; floats with ``digits`` decimals."""
    cells = [header] + [[f"{c:.{digits}f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells[1:]]
    return "\n".join(lines) + "\n"
