"""Blind generalization check: does the query pick what an expert would, on kernels it was never tuned on?

    /work/venv/bin/python benchmarks/kb_heldout.py [--home DIR] [--protocol strict] [--only ID ...]
                                                  [--json FILE]

The blind set (``tests/data/blind/``, how it was made: docs/blind_protocol.md) holds KernelBench-format
pairs ``<id>_task.py`` / ``<id>_kernel.py``, real Nsight Compute profiles (an H100, session 7) ``profiles/<id>.csv`` and
``labels.yaml``, written before any query by someone who had not read the KB's decision data. Each kernel
is labelled ``tuning`` (may guide later KB edits) or ``heldout`` (must never be used to write cases).

Every kernel is queried with the real ``kernelskill.query`` against a KB built from the bundled skills in
a temporary home (or ``--home``), under the named protocol's context (default ``strict``: fp32, no TF32,
no library for the main work), twice: with its profile and without (static only). Per split it prints

- ``top-1``: the first permitted method is one of the label's ``first`` methods (with a profile);
- ``top-5``: one of ``first`` is among the first five permitted methods (with a profile);
- ``bottleneck``: the diagnosed bottleneck is one of the label's ``bottleneck`` ids (with a profile);
- ``must-not``: kernels where a method of the label's ``must_not`` list is permitted (any rank);
- ``static top-1 / top-5``: the same against ``static_first`` (or ``first``) without the profile;

then one line per kernel (expected, got). Goals of the project on blind kernels with real profiles:
top-1 >= 75 %, top-5 >= 95 %, bottleneck >= 75 %; static-only top-5 >= 75 %. This script measures;
it never changes the KB.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT.parent))

from kernelskill.config import load_settings  # noqa: E402
from kernelskill.kb.home import open_store  # noqa: E402
from kernelskill.protocols import load_protocol  # noqa: E402
from kernelskill.retrieval.api import query  # noqa: E402

BLIND = ROOT / "tests" / "data" / "blind"
GOALS = {"top1": 75.0, "top5": 95.0, "bottleneck": 75.0, "static_top5": 75.0}
TOP_K = 5


@dataclass
class KernelRow:
    id: str
    split: str
    expected_first: list[str]
    expected_static: list[str]
    expected_bottleneck: list[str]
    must_not: list[str]
    has_profile: bool
    permitted: list[str] = field(default_factory=list)
    bottleneck: str | None = None
    static_permitted: list[str] = field(default_factory=list)
    top1: bool | None = None
    top5: bool | None = None
    bottleneck_ok: bool | None = None
    violations: list[str] = field(default_factory=list)
    static_top1: bool = False
    static_top5: bool = False
    static_violations: list[str] = field(default_factory=list)
    error: str | None = None


def load_labels(blind_dir: Path = BLIND) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((blind_dir / "labels.yaml").read_text())
    return dict(data["kernels"])


def _permitted_ids(result: Any) -> list[str]:
    return [p.id for p in sorted(result.permitted, key=lambda p: p.rank)]


def score_kernel(kid: str, label: dict[str, Any], *, blind_dir: Path, settings: Any, store: Any,
                 context: dict[str, Any]) -> KernelRow:
    """Query one blind kernel with and without its profile and compare with its label."""
    first = list(label["first"])
    row = KernelRow(id=kid, split=label["split"], expected_first=first,
                    expected_static=list(label.get("static_first") or first),
                    expected_bottleneck=list(label["bottleneck"]), must_not=list(label.get("must_not") or []),
                    has_profile=(blind_dir / "profiles" / f"{kid}.csv").is_file())
    kernel, task = blind_dir / f"{kid}_kernel.py", blind_dir / f"{kid}_task.py"
    try:
        static = query(kernel, task=task, settings=settings, store=store, context=context)
        row.static_permitted = _permitted_ids(static)
        row.static_top1 = bool(row.static_permitted) and row.static_permitted[0] in row.expected_static
        row.static_top5 = any(m in row.expected_static for m in row.static_permitted[:TOP_K])
        row.static_violations = [m for m in row.static_permitted if m in row.must_not]
        if row.has_profile:
            full = query(kernel, task=task, profile=blind_dir / "profiles" / f"{kid}.csv", settings=settings,
                         store=store, context=context)
            row.permitted = _permitted_ids(full)
            row.bottleneck = full.bottleneck.id
            row.top1 = bool(row.permitted) and row.permitted[0] in first
            row.top5 = any(m in first for m in row.permitted[:TOP_K])
            row.bottleneck_ok = row.bottleneck in row.expected_bottleneck
            row.violations = [m for m in row.permitted if m in row.must_not]
    except Exception as exc:  # noqa: BLE001 - a failing query is a result row, not the end of the table
        row.error = f"{type(exc).__name__}: {exc}"[:300]
    return row


def _pct(values: list[bool]) -> float | None:
    return round(100.0 * sum(values) / len(values), 1) if values else None


def summarize(rows: list[KernelRow]) -> dict[str, dict[str, Any]]:
    """Per split (and all): kernel counts and the percentages of the module docstring."""
    out: dict[str, dict[str, Any]] = {}
    for split in ("tuning", "heldout", "all"):
        sel = [r for r in rows if split == "all" or r.split == split]
        prof = [r for r in sel if r.has_profile and r.error is None]
        out[split] = {
            "kernels": len(sel),
            "with_profile": len(prof),
            "top1": _pct([bool(r.top1) for r in prof]),
            "top5": _pct([bool(r.top5) for r in prof]),
            "bottleneck": _pct([bool(r.bottleneck_ok) for r in prof]),
            "must_not_violations": sum(1 for r in prof if r.violations),
            "static_top1": _pct([r.static_top1 for r in sel if r.error is None]),
            "static_top5": _pct([r.static_top5 for r in sel if r.error is None]),
            "static_must_not_violations": sum(1 for r in sel if r.static_violations),
            "errors": sum(1 for r in sel if r.error),
        }
    return out


def evaluate_blind(*, blind_dir: Path = BLIND, settings: Any, store: Any, protocol: str = "strict",
                   ids: list[str] | None = None) -> dict[str, Any]:
    """The benchmark's core: score the chosen blind kernels (all by default) and summarize them."""
    labels = load_labels(blind_dir)
    unknown = sorted(set(ids or []) - set(labels))
    if unknown:
        raise KeyError(f"not in {blind_dir / 'labels.yaml'}: {unknown}")
    context = load_protocol(protocol).context("fp32")
    rows = [score_kernel(kid, labels[kid], blind_dir=blind_dir, settings=settings, store=store, context=context)
            for kid in sorted(ids or labels)]
    return {"protocol": protocol, "goals": GOALS, "summary": summarize(rows), "kernels": [asdict(r) for r in rows]}


# ------------------------------------------------------------------------------------------- output
def _fmt(v: Any) -> str:
    return "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))


def print_report(data: dict[str, Any]) -> None:
    cols = ("kernels", "with_profile", "top1", "top5", "bottleneck", "must_not_violations", "static_top1",
            "static_top5", "static_must_not_violations", "errors")
    heads = ("split", "n", "prof", "top-1 %", "top-5 %", "bneck %", "must-not", "st top-1 %", "st top-5 %",
             "st must-not", "err")
    widths = [8, 3, 4, 7, 7, 7, 8, 10, 10, 11, 3]
    print(f"blind set, protocol {data['protocol']}; goals with profiles: top-1 >= {GOALS['top1']:.0f} %, "
          f"top-5 >= {GOALS['top5']:.0f} %, bottleneck >= {GOALS['bottleneck']:.0f} %; "
          f"static top-5 >= {GOALS['static_top5']:.0f} %")
    print("  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True)))
    for split, s in data["summary"].items():
        cells = [split] + [_fmt(s[c]) for c in cols]
        print("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
    if not data["summary"]["all"]["with_profile"]:
        print("no committed profiles (tests/data/blind/profiles/): only the static-only columns are measured")
    print()
    print(f"{'kernel':38} {'split':7} {'expected first':52} {'got (profile)':44} {'bottleneck exp / got':52} "
          f"{'got (static)':40} flags")
    for r in data["kernels"]:
        flags = []
        if r["error"]:
            flags.append("ERROR " + r["error"])
        if r["has_profile"]:
            flags.append("T1" if r["top1"] else ("T5" if r["top5"] else "miss"))
            flags.append("B" if r["bottleneck_ok"] else "b-miss")
        else:
            flags.append("no profile")
        flags.append("S5" if r["static_top5"] else "s-miss")
        if r["violations"] or r["static_violations"]:
            flags.append("MUST-NOT " + ",".join(sorted(set(r["violations"] + r["static_violations"]))))
        bn = f"{'/'.join(r['expected_bottleneck'])} / {r['bottleneck']}"
        print(f"{r['id']:38} {r['split']:7} {','.join(r['expected_first']):52} {','.join(r['permitted'][:3]):44} "
              f"{bn:52} {','.join(r['static_permitted'][:3]):40} {' '.join(flags)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", help="kernelskill home with the KB (default: a temporary one from the bundled skills)")
    ap.add_argument("--protocol", default="strict")
    ap.add_argument("--only", nargs="*", help="kernel ids")
    ap.add_argument("--json", dest="json_file", help="also write the results as JSON here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="ks-blind-") as tmp:
        settings = load_settings(home=args.home or tmp)
        t0 = time.perf_counter()
        store = open_store(settings)
        data = evaluate_blind(settings=settings, store=store, protocol=args.protocol, ids=args.only)
        data["seconds"] = round(time.perf_counter() - t0, 1)
        data["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print_report(data)
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
