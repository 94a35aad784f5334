"""Harness speed on the GPU box, over current KernelBench tasks at their shipped sizes.

    python benchmarks/harness.py --cases DIR [--kernelbench-timing FILE] [--json OUT] [--jsonl OUT]

``DIR/cases.json`` lists cases ``{name, level, task, candidate, protocol}`` (paths relative to DIR): a
KernelBench task file and a correct candidate for it. KernelBench's files are not part of this
repository; see docs/harness.md for how the cases of the committed figures were made.

Prints, per measurement, one table:

1. cold ``load_inline`` builds one at a time (median; the shared trampoline is built first, apart),
   then the remaining candidates built in parallel;
2. a cached build: ``build()`` hitting the cache, and the worker importing the built candidate;
3. one full evaluation per case (every check on, under the case's protocol): wall time, p50/p95 per
   level and overall, the timed trials and the stage that took longest;
4. the eager baseline three ways, side by side in this process: the evaluation's median (worker),
   our timer here, and KernelBench's own timing function (``time_execution_with_cuda_event``) on the
   same model and inputs.

Every result is appended to ``--jsonl`` as it is measured, so a run cut short still reports.
Needs CUDA, nvcc and torch (no other dependency).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _table import table as _table  # noqa: E402


def table(title: str, header: list[str], rows: list[list[object]]) -> str:
    return _table(title, header, rows, digits=3)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    vals = sorted(values)
    k = max(0, min(len(vals) - 1, int(round(q / 100 * len(vals) + 0.5)) - 1))
    return vals[k]


class Recorder:
    def __init__(self, jsonl: Path | None) -> None:
        self.jsonl = jsonl
        self.data: dict[str, Any] = {}

    def add(self, section: str, key: str, value: Any) -> None:
        self.data.setdefault(section, {})[key] = value
        if self.jsonl:
            with open(self.jsonl, "a") as fh:
                fh.write(json.dumps({"section": section, "key": key, "value": value}, default=str) + "\n")


def bench_builds(cases: list[dict], root: Path, cache: str, serial: int, rec: Recorder) -> str:
    from kernelskill.pipeline.harness import EvalConfig, build, build_many

    cfg = EvalConfig(cache_dir=cache)
    rows: list[list[object]] = []
    warm = HERE.parent / "tests" / "harness_cases" / "gpu" / "good_add_inline.py"
    t = time.perf_counter()
    b = build(warm, cfg)
    first = time.perf_counter() - t
    rows.append(["first load_inline build (builds the shared trampoline)", first, b.ok, "-"])
    rec.add("builds", "first_with_trampoline", {"seconds": first, "ok": b.ok})
    colds: list[float] = []
    for case in cases[:serial]:
        t = time.perf_counter()
        b = build(root / case["candidate"], cfg)
        sec = time.perf_counter() - t
        events = json.loads((Path(cache) / b.key / "build.json").read_text()).get("events", [])
        route = ",".join(e.get("route", "") + ("" if e.get("ok") else "(failed)") for e in events)
        colds.append(sec)
        rows.append([f"cold build, one at a time: {case['name']}", sec, b.ok, route])
        rec.add("builds", case["name"], {"seconds": sec, "ok": b.ok, "route": route, "message": b.message})
    rest = cases[serial:]
    if rest:
        t = time.perf_counter()
        res = build_many([root / c["candidate"] for c in rest], cfg)
        wall = time.perf_counter() - t
        rows.append([f"{len(rest)} cold builds in parallel (wall / candidate)", wall / len(rest),
                     all(r.ok for r in res), "-"])
        rec.add("builds", "parallel", {"n": len(rest), "wall_s": wall, "each_s": [r.seconds for r in res],
                                       "ok": [r.ok for r in res], "messages": [r.message for r in res]})
    if colds:
        rows.append(["MEDIAN cold build (one at a time)", statistics.median(colds), "", ""])
        rec.add("builds", "median_cold_s", statistics.median(colds))
    hits = []
    for case in cases:
        t = time.perf_counter()
        build(root / case["candidate"], cfg)
        hits.append(time.perf_counter() - t)
    rows.append(["cache hit: build() of a built candidate (max over cases)", max(hits), "", ""])
    rec.add("builds", "cache_hit_max_s", max(hits))
    return table("Builds (seconds)", ["what", "seconds", "ok", "route"], rows)


def bench_evals(cases: list[dict], root: Path, cache: str, rec: Recorder, budget: float | None) -> str:
    from kernelskill.pipeline.harness import evaluate
    from kernelskill.pipeline.harness.config import eval_config

    rows: list[list[object]] = []
    walls: dict[int, list[float]] = {}
    imports: list[float] = []
    for case in cases:
        cfg = eval_config({}, protocol=case["protocol"], cache_dir=cache,
                          **({"timing_budget_s": budget} if budget else {}))
        t = time.perf_counter()
        res = evaluate(root / case["task"], root / case["candidate"], cfg)
        wall = time.perf_counter() - t
        d = res.details
        stages = d.get("stage_times_s") or {}
        marks = sorted(stages.items(), key=lambda kv: kv[1])
        spans = [(marks[i + 1][1] - marks[i][1], marks[i][0]) for i in range(len(marks) - 1)]
        slowest = max(spans) if spans else (0.0, "-")
        if d.get("import_s") is not None:
            imports.append(float(d["import_s"]))
        walls.setdefault(case["level"], []).append(wall)
        rows.append([case["name"], case["level"], case["protocol"], res.status, wall,
                     d.get("worker_seconds", 0.0), d.get("import_s", "-"), (d.get("timing") or {}).get("trials", "-"),
                     f"{slowest[1]} {slowest[0]:.1f}s", str(d.get("alt_shapes", "-"))[:48]])
        rec.add("eval", case["name"], {"level": case["level"], "protocol": case["protocol"], "wall_s": wall,
                                       "result": res.to_dict()})
        print(f"  {case['name']}: {res.status} in {wall:.1f} s ({res.message[:100]})", file=sys.stderr, flush=True)
    text = table("One evaluation per case, every check on (seconds)",
                 ["case", "level", "protocol", "status", "wall", "worker", "import", "trials", "slowest stage",
                  "second shape set"], rows)
    summary = []
    every = [w for ws in walls.values() for w in ws]
    for level in sorted(walls):
        ws = walls[level]
        summary.append([f"level {level}", len(ws), statistics.median(ws), percentile(ws, 95), max(ws)])
    if every:
        summary.append(["all", len(every), statistics.median(every), percentile(every, 95), max(every)])
    if imports:
        summary.append(["cached build load (worker import)", len(imports), statistics.median(imports),
                        percentile(imports, 95), max(imports)])
    rec.add("eval_summary", "levels", summary)
    return text + "\n" + table("Evaluation wall time per candidate (seconds)",
                               ["set", "n", "p50", "p95", "max"], summary)


def load_kernelbench_timing(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("kernelbench_timing", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: cannot import KernelBench's timing module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_baselines(cases: list[dict], root: Path, kb_timing: Path, rec: Recorder) -> str:
    """The eager reference timed by KernelBench's function and ours, in this process, same model/inputs."""
    import contextlib
    import io

    import torch

    from kernelskill.pipeline.harness import timing
    from kernelskill.pipeline.harness.loader import load_task

    kb = load_kernelbench_timing(kb_timing)
    dev = torch.device("cuda", 0)
    flusher = timing.L2Flusher(dev, 256)
    rows: list[list[object]] = []
    evals = rec.data.get("eval", {})
    for case in cases:
        mod = load_task(root / case["task"], f"kbt_{case['name']}")
        with torch.no_grad(), torch.device(dev):
            torch.manual_seed(42)
            model = mod.Model(*mod.get_init_inputs()).to(dev)
            torch.manual_seed(42)
            xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
            with contextlib.redirect_stdout(io.StringIO()):  # it prints per call
                kb_times = kb.time_execution_with_cuda_event(model, xs, num_warmup=3, num_trials=100,
                                                             discard_first=1, verbose=False, device=dev)
            ours = timing.time_interleaved({"ref": lambda v, m=model: m(*v)}, {"ref": [xs]}, trials=100,
                                           warmup=3, flusher=flusher)["ref"].summary()
        kb_med, kb_mean = statistics.median(kb_times), statistics.fmean(kb_times)
        ev = (evals.get(case["name"]) or {}).get("result") or {}
        harness_ms = ev.get("baseline_ms")
        ieee = ev.get("baseline_ieee_ms")
        row = {"kernelbench_median_ms": kb_med, "kernelbench_mean_ms": kb_mean, "ours_here_ms": ours["median_ms"],
               "harness_eval_ms": harness_ms, "harness_ieee_ms": ieee,
               "ours_vs_kb_pct": (ours["median_ms"] / kb_med - 1) * 100,
               "harness_vs_kb_pct": (harness_ms / kb_med - 1) * 100 if harness_ms else None}
        rec.add("baseline", case["name"], row)
        rows.append([case["name"], kb_med, kb_mean, ours["median_ms"], harness_ms if harness_ms else "-",
                     f"{row['ours_vs_kb_pct']:+.1f}",
                     f"{row['harness_vs_kb_pct']:+.1f}" if row["harness_vs_kb_pct"] is not None else "-",
                     ieee if ieee else "-"])
        del model, xs
        torch.cuda.empty_cache()
    return table("Eager baseline (ms): KernelBench's timing function vs ours, same process, PyTorch defaults",
                 ["case", "KB median", "KB mean", "ours here", "harness eval", "here vs KB %", "eval vs KB %",
                  "eval TF32-off"], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=Path, required=True, help="folder with cases.json")
    ap.add_argument("--kernelbench-timing", type=Path, default=None,
                    help="KernelBench's src/kernelbench/timing.py (the side-by-side baseline table)")
    ap.add_argument("--serial-builds", type=int, default=5, help="cold builds timed one at a time")
    ap.add_argument("--budget", type=float, default=None, help="timing budget per function, seconds")
    ap.add_argument("--only", default="", help="comma list of case names")
    ap.add_argument("--skip", default="", help="comma list of: builds,eval,baseline")
    ap.add_argument("--cache", default=None, help="build cache folder (default: a fresh temporary one)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--jsonl", type=Path, default=None)
    ap.add_argument("--text", type=Path, default=None, help="also write the printed tables here")
    args = ap.parse_args(argv)
    cases = json.loads((args.cases / "cases.json").read_text())
    if args.only:
        keep = set(args.only.split(","))
        cases = [c for c in cases if c["name"] in keep]
    skip = set(filter(None, args.skip.split(",")))
    cache = args.cache or str(Path(tempfile.mkdtemp(prefix="ks-bench-")) / "cache")
    rec = Recorder(args.jsonl)
    out: list[str] = []

    def show(text: str) -> None:
        print(text, flush=True)
        out.append(text)
        if args.text:
            args.text.write_text("\n".join(out))

    if "builds" not in skip:
        show(bench_builds(cases, args.cases, cache, args.serial_builds, rec))
    if "eval" not in skip:
        show(bench_evals(cases, args.cases, cache, rec, args.budget))
    if "baseline" not in skip and args.kernelbench_timing:
        show(bench_baselines(cases, args.cases, args.kernelbench_timing, rec))
    if args.json:
        args.json.write_text(json.dumps(rec.data, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
