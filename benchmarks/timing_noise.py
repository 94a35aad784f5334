"""Timing noise of the harness: IQR/median per timed function (candidate, eager, torch.compile) and the width
of each speedup's 95 % interval, before (the published suites) and after (this harness on the GPU).

    python benchmarks/timing_noise.py before [--results benchmarks/results/suite_h200]
    python benchmarks/timing_noise.py after --out DIR [--repeats 2] [--max-seconds 300] [--no-compile]

``before`` reads every ``*-runs.tar.gz`` under ``--results`` (an archive of run archives, each with an
``events.jsonl``) with the standard library and takes every correct evaluation's medians and IQRs.
``after`` writes ~10 KernelBench-format tasks of different durations (written here, 20 us to 10 ms; each
candidate is the task's own computation written again, so its speedup is about 1 and the noise is the
timer's), evaluates each ``--repeats`` times through the harness (every check on, the kernelbench protocol,
torch.compile as second baseline) and writes ``timing_noise.json`` and ``timing_noise.txt`` to ``--out``.
The goal: IQR/median <= 2 % at p50 and <= 5 % at p90 for timings of 50 us and more.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _table import table  # noqa: E402

#: timings below this are reported but not counted toward the goal
MIN_MS = 0.05


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list: the smallest value with q % at or below it."""
    vals = sorted(values)
    k = max(0, min(len(vals) - 1, math.ceil(q / 100 * len(vals)) - 1))
    return vals[k]


# --- before: the published archives -------------------------------------------------------------------
def _events(archive: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """(run name, events) of every run archive inside a suite's runs archive."""
    runs: list[tuple[str, list[dict[str, Any]]]] = []
    with tarfile.open(archive, "r:gz") as outer:
        for member in outer.getmembers():
            if not member.name.endswith(".tar.gz"):
                continue
            data = outer.extractfile(member)
            if data is None:
                continue
            with tarfile.open(fileobj=io.BytesIO(data.read()), mode="r:gz") as inner:
                for m in inner.getmembers():
                    if m.name.endswith("/events.jsonl"):
                        fh = inner.extractfile(m)
                        lines = fh.read().decode("utf-8").splitlines() if fh else []
                        runs.append((m.name.split("/")[0], [json.loads(line) for line in lines if line.strip()]))
    return runs


def timed_functions(result: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """{function: (median ms, IQR ms)} of one evaluation result (candidate, eager, torch.compile)."""
    out: dict[str, tuple[float, float]] = {}
    if result.get("candidate_ms") and result.get("candidate_iqr_ms") is not None:
        out["candidate"] = (float(result["candidate_ms"]), float(result["candidate_iqr_ms"]))
    if result.get("baseline_ms") and result.get("baseline_iqr_ms") is not None:
        out["eager"] = (float(result["baseline_ms"]), float(result["baseline_iqr_ms"]))
    comp = ((result.get("details") or {}).get("timing") or {}).get("compile") or {}
    if comp.get("median_ms") and comp.get("iqr_ms") is not None:
        out["compile"] = (float(comp["median_ms"]), float(comp["iqr_ms"]))
    return out


def noise_rows(results: list[dict[str, Any]]) -> tuple[list[list[object]], dict[str, Any]]:
    """Table rows and figures: IQR/median p50/p90 per function (timings >= 50 us), candidates under 0.5 ms,
    and the speedup interval widths where the results carry them."""
    ratios: dict[str, list[float]] = {"candidate": [], "eager": [], "compile": []}
    short: list[float] = []
    widths: dict[str, list[float]] = {"speedup_ci": [], "compile_speedup_ci": []}
    for r in results:
        for fn, (med, iqr) in timed_functions(r).items():
            if med >= MIN_MS:
                ratios[fn].append(iqr / med)
            if fn == "candidate" and MIN_MS <= med < 0.5:
                short.append(iqr / med)
        for key, est in (("speedup_ci", r.get("speedup")),
                         ("compile_speedup_ci", (r.get("details") or {}).get("speedup_vs_compile"))):
            ci = r.get(key)
            if ci and est:
                widths[key].append(max(est - ci[0], ci[1] - est) / est)
    rows: list[list[object]] = []
    figures: dict[str, Any] = {}
    for fn, vals in [*ratios.items(), ("candidate < 0.5 ms", short)]:
        if vals:
            p50, p90 = percentile(vals, 50) * 100, percentile(vals, 90) * 100
            rows.append([f"IQR/median {fn}", len(vals), p50, p90, max(vals) * 100])
            figures[fn] = {"n": len(vals), "p50_pct": p50, "p90_pct": p90}
    for key, vals in widths.items():
        if vals:
            p50, p90 = percentile(vals, 50) * 100, percentile(vals, 90) * 100
            rows.append([f"{key} half-width", len(vals), p50, p90, max(vals) * 100])
            figures[key] = {"n": len(vals), "p50_pct": p50, "p90_pct": p90}
    return rows, figures


def before(results_dir: Path) -> tuple[str, dict[str, Any]]:
    results: list[dict[str, Any]] = []
    suites = sorted(results_dir.glob("*-runs.tar.gz"))
    for archive in suites:
        for _name, events in _events(archive):
            for e in events:
                if e.get("type") == "eval":
                    r = (e.get("data") or {}).get("result") or {}
                    if r.get("status") == "ok" and r.get("correct", True):
                        results.append(r)
    rows, figures = noise_rows(results)
    title = (f"Timing noise before: {len(results)} correct evaluations in {len(suites)} published suites "
             f"({', '.join(a.name for a in suites)}); timings >= {MIN_MS * 1e3:.0f} us; percent")
    return table(title, ["figure", "n", "p50 %", "p90 %", "max %"], rows, digits=2), figures


# --- after: this harness on the GPU ---------------------------------------------------------------------
#: name -> (module-level sizes, forward arguments, forward body, get_inputs body)
TASKS: dict[str, tuple[str, str, str, str]] = {
    "add_1m": ("N = 1 << 20", "x, y", "return x + y", "[torch.rand(N), torch.rand(N)]"),
    "relu_32m": ("N = 1 << 25", "x", "return torch.relu(x)", "[torch.randn(N)]"),
    "softmax_4k": ("R, C = 4096, 4096", "x", "return torch.softmax(x, dim=1)", "[torch.randn(R, C)]"),
    "layernorm_4k_8k": ("R, C = 4096, 8192", "x", "return torch.nn.functional.layer_norm(x, (x.shape[-1],))",
                        "[torch.randn(R, C)]"),
    "gelu_scale_64m": ("R, C = 8192, 8192", "x", "return torch.nn.functional.gelu(x) * 1.7", "[torch.randn(R, C)]"),
    "rowsum_16k": ("R, C = 16384, 16384", "x", "return x.sum(dim=1)", "[torch.randn(R, C)]"),
    "bmm_small": ("B, M = 256, 128", "x, y", "return torch.bmm(x, y)", "[torch.randn(B, M, M), torch.randn(B, M, M)]"),
    "matmul_2k": ("M = 2048", "x, y", "return x @ y", "[torch.randn(M, M), torch.randn(M, M)]"),
    "swish_bias_256m": ("N = 1 << 28", "x", "return x * torch.sigmoid(x) + 0.5", "[torch.randn(N)]"),
    "matmul_4k": ("M = 4096", "x, y", "return x @ y", "[torch.randn(M, M), torch.randn(M, M)]"),
    "conv3x3_64_128": ("B, C, K, H = 16, 64, 128, 112", "x, y", "return torch.nn.functional.conv2d(x, y, padding=1)",
                       "[torch.randn(B, C, H, H), torch.randn(K, C, 3, 3) * 0.05]"),
}


def _files(root: Path, name: str, size: str, args: str, body: str, inputs: str) -> tuple[Path, Path]:
    task = root / f"{name}_task.py"
    task.write_text(f"import torch\n\n{size}\n\n\nclass Model(torch.nn.Module):\n"
                    f"    def forward(self, {args}):\n        {body}\n\n\n"
                    f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return []\n")
    cand = root / f"{name}_candidate.py"
    cand.write_text(f"import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
                    f"    def forward(self, {args}):\n        {body}\n")
    return task, cand


def after(out: Path, repeats: int, max_seconds: float, compile_baseline: bool,
          only: list[str] | None = None) -> tuple[str, dict[str, Any]]:
    import torch  # the GPU mode only: ``before`` runs anywhere with the standard library

    from kernelskill.pipeline.harness import EvalJob, LocalEvaluator
    from kernelskill.pipeline.harness.config import eval_config

    work = out / "tasks"
    work.mkdir(parents=True, exist_ok=True)
    # inline: each evaluation times torch.compile itself (the noise of that timing is what is measured here;
    # the once-per-task baseline would repeat one stored measurement)
    cfg = eval_config({}, protocol="kernelbench", cache_dir=str(out / "cache"),
                      baseline="compile" if compile_baseline else "eager", compile_baseline="inline",
                      run_timeout_s=300)
    jobs = []
    for rep in range(repeats):
        for name, (size, args, body, inputs) in TASKS.items():
            if only and name not in only:
                continue
            task, cand = _files(work, name, size, args, body, inputs)
            jobs.append(EvalJob(str(task), str(cand), cfg, tag=f"{name}#{rep}"))
    t0 = time.perf_counter()
    per_task: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    with (out / "timing_noise.jsonl").open("w") as log:
        evaluator = LocalEvaluator()
        for job in jobs:
            if time.perf_counter() - t0 > max_seconds:
                print(f"stopping: {max_seconds:.0f} s used", file=sys.stderr)
                break
            res = evaluator.submit([job])[0]
            r = res.to_dict()
            r.pop("build_log", None)
            log.write(json.dumps({"tag": job.tag, "result": r}, default=str) + "\n")
            log.flush()
            d = r.get("details") or {}
            t = d.get("timing") or {}
            row = {"tag": job.tag, "status": r["status"], "message": r.get("message", "")[:200],
                   "candidate_ms": r.get("candidate_ms"), "speedup": r.get("speedup"), "speedup_ci": r.get("speedup_ci"),
                   "compile_speedup_ci": r.get("compile_speedup_ci"), "trials": t.get("trials"), "stop": t.get("stop"),
                   "methods": {k: (t.get(k) or {}).get("method") for k in ("candidate", "reference", "compile")},
                   "iqr_pct": {fn: 100 * iqr / med for fn, (med, iqr) in timed_functions(r).items()},
                   "peak_mem_mb": d.get("peak_mem_mb"), "gpu": d.get("gpu")}
            per_task.append(row)
            print(json.dumps(row, default=str), flush=True)
            if r["status"] == "ok":
                results.append(r)
    rows, figures = noise_rows(results)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    text = table(f"Timing noise after: {len(results)} correct evaluations of {len(only or TASKS)} tasks x {repeats} on "
                 f"{device}; timings >= {MIN_MS * 1e3:.0f} us; percent",
                 ["figure", "n", "p50 %", "p90 %", "max %"], rows, digits=2)
    task_rows = [[p["tag"], p["status"], p["candidate_ms"] or 0.0, p["trials"] or 0, p["stop"] or "",
                  ", ".join(f"{k} {v:.2f}" for k, v in p["iqr_pct"].items()),
                  "" if not p["speedup_ci"] else f"{p['speedup']:.3f} [{p['speedup_ci'][0]:.3f}, {p['speedup_ci'][1]:.3f}]",
                  ", ".join(f"{k}:{v}" for k, v in p["methods"].items() if v)] for p in per_task]
    text += "\n" + table("Per evaluation", ["task#repeat", "status", "cand ms", "rounds", "stop", "IQR/median %",
                                             "speedup [95 % CI]", "methods"], task_rows, digits=4)
    return text, {"figures": figures, "evaluations": per_task, "device": device}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("before", help="noise figures of the published suites (standard library only)")
    b.add_argument("--results", type=Path, default=HERE / "results" / "suite_h200")
    a = sub.add_parser("after", help="noise figures of this harness on the GPU")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--repeats", type=int, default=2)
    a.add_argument("--max-seconds", type=float, default=300.0)
    a.add_argument("--no-compile", action="store_true")
    a.add_argument("--only", default="", help="comma-separated task names (default: all)")
    args = ap.parse_args(argv)
    if args.mode == "before":
        if not args.results.is_dir():
            print(f"{args.results}: not a folder", file=sys.stderr)
            return 2
        text, figures = before(args.results)
        print(text)
        print(json.dumps(figures, indent=1))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - set(TASKS))
    if unknown:
        print(f"--only: unknown task(s) {unknown}; known: {sorted(TASKS)}", file=sys.stderr)
        return 2
    text, data = after(args.out, args.repeats, args.max_seconds, not args.no_compile, only)
    (args.out / "timing_noise.txt").write_text(text)
    (args.out / "timing_noise.json").write_text(json.dumps(data, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
