"""The same suite on one GPU and on several, side by side: one row per suite folder (each a finished
``kernelskill bench run`` or ``bench eval``), from what the suite recorded and nothing measured here.

    python benchmarks/scaling.py SUITE_DIR [SUITE_DIR ...] [--json]

Per suite: the evaluator (``local``, ``ray``, ``MODULE:ATTR``) and the device of its sessions
(``sessions.jsonl``, one line per start of the suite's command), the GPU slots, the devices its results name
(``details.device`` of each recorded eval and profile), the GPU jobs, the wall time (summed over the
sessions), the GPU busy share (busy slot-seconds over slot-seconds from the first job's start to the last
one's end, over all sessions), the evaluations per GPU-hour (recorded evaluations over wall time x slots),
the tries run again because a worker died (``details.attempts`` - 1, summed) and the jobs lost after
every try (sessions' ``lost``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _table import table  # noqa: E402

from kernelskill.pipeline.bench.report import result_details  # noqa: E402
from kernelskill.pipeline.bench.suite import Suite, json_lines  # noqa: E402

COLUMNS = ["suite", "evaluator", "device", "slots", "devices used", "jobs", "evals", "wall s", "GPU busy",
           "evals/GPU-h", "retries", "lost"]


def _joined(values: list[Any]) -> str:
    seen = sorted({str(v) for v in values if v not in (None, "")})
    return " + ".join(seen) if seen else "-"


def suite_row(folder: Path) -> dict[str, Any]:
    """One suite's line of the table, from its ``suite.json``, ``sessions.jsonl`` and runs' event logs."""
    if not (folder / "suite.json").is_file():
        raise ValueError(f"{folder}: not a suite folder (no suite.json)")
    sessions = Suite(folder).sessions
    results = [e for f in sorted(folder.glob("runs/*/events.jsonl")) for e in json_lines(f)
               if e.get("type") in ("eval", "profile")]
    details = [result_details(e) for e in results]
    evals = sum(1 for e in results if e.get("type") == "eval")
    slots = max((int(s.get("slots") or 0) for s in sessions), default=0)
    wall = sum(float(s.get("elapsed_s") or 0.0) for s in sessions)
    busy = sum(float(s.get("gpu_busy_s") or 0.0) for s in sessions)
    span = sum(float(s.get("gpu_span_s") or 0.0) * int(s.get("slots") or 0) for s in sessions)
    gpu_hours = sum(float(s.get("elapsed_s") or 0.0) * int(s.get("slots") or 0) for s in sessions) / 3600
    return {"suite": folder.name, "path": str(folder), "evaluator": _joined([s.get("evaluator") for s in sessions]),
            "device": _joined([s.get("device") for s in sessions]), "slots": slots,
            "ray_address": _joined([s.get("ray_address") for s in sessions]),
            "cluster_gpus": max((int(s["cluster_gpus"]) for s in sessions if s.get("cluster_gpus") is not None),
                                default=None),
            "devices_used": len({d["device"] for d in details if d.get("device")}),
            "gpu_names": _joined([d.get("gpu_name") for d in details]), "sessions": len(sessions),
            "jobs": sum(int(s.get("gpu_jobs") or 0) for s in sessions), "evals": evals,
            "profiles": len(results) - evals, "wall_s": round(wall, 3),
            "gpu_busy_share": round(min(1.0, busy / span), 6) if span > 0 else None,
            "evals_per_gpu_hour": round(evals / gpu_hours, 3) if gpu_hours > 0 else None,
            "retries": sum(max(0, int(d["attempts"]) - 1) for d in details if isinstance(d.get("attempts"), int)),
            "lost": sum(int(s.get("lost") or 0) for s in sessions)}


def render(rows: list[dict[str, Any]]) -> str:
    def cell(value: Any, fmt: str = "{}") -> Any:
        return "-" if value is None else fmt.format(value)

    body = [[r["suite"], r["evaluator"], r["device"], r["slots"], r["devices_used"], r["jobs"], r["evals"],
             f"{r['wall_s']:.1f}", cell(r["gpu_busy_share"], "{:.0%}"), cell(r["evals_per_gpu_hour"], "{:.1f}"),
             r["retries"], r["lost"]] for r in rows]
    return table("GPU scaling: the same suite per evaluator and device count (from the suites' records)",
                 COLUMNS, body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="+", type=Path, help="suite folders (finished bench run / bench eval)")
    parser.add_argument("--json", action="store_true", help="the rows as JSON")
    args = parser.parse_args(argv)
    try:
        rows = [suite_row(folder) for folder in args.suites]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"suites": rows}, indent=2) if args.json else render(rows), end="" if not args.json else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
