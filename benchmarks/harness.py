"""Harness speed on the GPU box: build times, evaluation overhead, timing noise, KernelBench agreement.

    python -m kernelskill.benchmarks.harness [--quick] [--json OUT]   (or python benchmarks/harness.py)

Prints one table per measurement. Needs CUDA, nvcc and torch (no other dependency).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from _stages import stage

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = ROOT / "tests" / "harness_cases"

INLINE_TEMPLATE = (CASES / "gpu" / "good_add_inline.py").read_text()
FAST_TEMPLATE = (CASES / "gpu" / "good_add_fastpath.py").read_text()


def _unique(text: str, tag: str) -> str:
    nonce = uuid.uuid4().hex[:10]
    text = text.replace("ks_case_add", f"ks_bench_{tag}_{nonce}")
    # a comment in the CUDA source makes it a new source (a cold build)
    return text.replace('cuda_src = r"""', f'cuda_src = r"""\n// {nonce}').replace('SRC = r"""',
                                                                                f'SRC = r"""\n// {nonce}')


def _write(tmp: Path, text: str, name: str) -> Path:
    p = tmp / f"{name}.py"
    p.write_text(text)
    return p


def table(title: str, header: list[str], rows: list[list[object]]) -> str:
    cells = [header] + [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells[1:]]
    return "\n".join(lines) + "\n"


def bench_builds(tmp: Path, cache: str, parallel: int, quick: bool) -> tuple[str, dict]:
    from kernelskill.pipeline.harness import EvalConfig, build, build_many

    out: dict = {}
    rows = []
    cfg = EvalConfig(cache_dir=cache)
    # fast path: cold then cached
    fp = _write(tmp, _unique(FAST_TEMPLATE, "fp"), "fast_cold")
    t = time.perf_counter()
    b = build(fp, cfg)
    cold_fp = time.perf_counter() - t
    t = time.perf_counter()
    b2 = build(fp, cfg)
    hit_fp = time.perf_counter() - t
    ev = json.loads((Path(cache) / b.key / "build.json").read_text())
    nvcc_s = ev.get("fastpath", [{}])[0].get("seconds") if ev.get("fastpath") else None
    rows.append(["fast path (nvcc -cubin)", cold_fp, nvcc_s, hit_fp, b.ok and b2.cached])
    out["fastpath"] = {"cold_s": cold_fp, "compile_s": nvcc_s, "hit_s": hit_fp}

    routes = [("load_inline fast route (1 nvcc call + shared trampoline)", {}, {}),
              ("load_inline fast route, second candidate", {}, {}),
              ("load_inline light headers (2 units, ninja)", {}, {"KERNELSKILL_HARNESS_NO_FAST_INLINE": "1"})]
    if os.environ.get("KERNELSKILL_BENCH_PCH"):
        routes.append(("load_inline light headers + pch", {"use_pch": True},
                       {"KERNELSKILL_HARNESS_NO_FAST_INLINE": "1"}))
    if not quick:
        routes.append(("load_inline as written (torch default)", {"fast_headers": False}, {}))
    for label, over, env in routes:
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            c = EvalConfig(cache_dir=cache, **over)
            p = _write(tmp, _unique(INLINE_TEMPLATE, "li"), f"inline_{len(rows)}")
            t = time.perf_counter()
            b = build(p, c)
            cold = time.perf_counter() - t
            t = time.perf_counter()
            b2 = build(p, c)
            hit = time.perf_counter() - t
            ev = json.loads((Path(cache) / b.key / "build.json").read_text()).get("events", [])
            inner = sum(e.get("seconds", 0) for e in ev)
            routes_used = ",".join(e.get("route", "") + ("" if e.get("ok") else "(failed)") for e in ev)
            rows.append([f"{label} [{routes_used}]", cold, inner, hit, b.ok and b2.cached])
            out[label] = {"cold_s": cold, "inner_s": inner, "hit_s": hit, "ok": b.ok, "message": b.message}
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    # parallel light builds
    if parallel > 1:
        paths = [_write(tmp, _unique(INLINE_TEMPLATE, "par"), f"par_{i}") for i in range(parallel)]
        t = time.perf_counter()
        res = build_many(paths, cfg, jobs=parallel)
        wall = time.perf_counter() - t
        per = [r.seconds for r in res]
        rows.append([f"{parallel} load_inline builds in parallel (wall / candidate)", wall / parallel,
                     statistics.median(per), 0.0, all(r.ok for r in res)])
        out["parallel"] = {"n": parallel, "wall_s": wall, "per_candidate_wall_s": wall / parallel,
                           "median_each_s": statistics.median(per)}
    text = table("Build time per candidate (seconds; worker start-up included in 'cold')",
                 ["route", "cold", "compile only", "cache hit", "ok"], rows)
    return text, out


EVAL_CASES = (("add", "good_add_fastpath"), ("softmax_wide", "good_softmax_fastpath"),
              ("matmul", "good_matmul_fastpath"))


def bench_eval(cache: str, repeats: int, cases: tuple[tuple[str, str], ...] = EVAL_CASES) -> tuple[str, dict]:
    from kernelskill.pipeline.harness import EvalConfig, evaluate

    rows = []
    out = {}
    for task, cand in cases:
        meds, walls, refs = [], [], []
        res = None
        for _ in range(repeats):
            cfg = EvalConfig(cache_dir=cache, timing_trials=100)
            t = time.perf_counter()
            res = evaluate(CASES / "tasks" / f"{task}.py", CASES / "gpu" / f"{cand}.py", cfg)
            walls.append(time.perf_counter() - t)
            if res.status == "ok":
                meds.append(res.candidate_ms)
                refs.append(res.baseline_ms)
        if not meds:
            rows.append([cand, res.status if res else "?", "", "", "", "", ""])
            continue
        spread = (max(meds) - min(meds)) / statistics.fmean(meds) * 100
        ref_spread = (max(refs) - min(refs)) / statistics.fmean(refs) * 100
        timed = 2 * 100 * (meds[0] + refs[0]) / 1e3
        rows.append([cand, statistics.median(walls), timed, meds[0], spread, refs[0], ref_spread])
        out[cand] = {"eval_wall_s": walls, "candidate_ms": meds, "baseline_ms": refs,
                     "spread_pct": spread, "ref_spread_pct": ref_spread,
                     "details": {k: res.details.get(k) for k in ("import_s", "worker_seconds", "speed_of_light",
                                                                  "wall_check", "stage_times_s")}}
    text = table(f"Evaluation (cached build), {repeats} runs each: wall per evaluation, spread of medians",
                 ["candidate", "eval wall s", "GPU timed s", "cand ms", "cand spread %", "eager ms",
                  "eager spread %"], rows)
    return text, out


def bench_kernelbench_agreement() -> tuple[str, dict]:
    """Eager reference: our protocol (median, interleaved, rotated inputs) vs KernelBench's (mean)."""
    import torch

    from kernelskill.pipeline.harness import timing
    from kernelskill.pipeline.harness.loader import load_task

    dev = torch.device("cuda", 0)
    flusher = timing.L2Flusher(dev, 256)
    rows = []
    out = {}
    with torch.no_grad():
        for task in ("add", "softmax_wide", "matmul"):
            mod = load_task(CASES / "tasks" / f"{task}.py", f"kb_{task}")
            torch.manual_seed(42)
            model = mod.Model(*mod.get_init_inputs()).to(dev)
            torch.manual_seed(43)
            xs = [x.to(dev) for x in mod.get_inputs()]
            kb = timing.time_kernelbench(lambda v, m=model: m(*v), xs, trials=100, warmup=3, flusher=flusher)
            sets = [[x.clone() for x in xs] for _ in range(4)]
            ours = timing.time_interleaved({"ref": lambda v, m=model: m(*v)}, {"ref": sets}, trials=100, warmup=3,
                                           flusher=flusher)["ref"].summary()
            diff = (ours["median_ms"] - kb["mean_ms"]) / kb["mean_ms"] * 100
            rows.append([task, kb["mean_ms"], kb["median_ms"], ours["median_ms"], ours["iqr_ms"], diff])
            out[task] = {"kernelbench": kb, "ours": ours, "diff_pct": diff}
    text = table("Eager baseline: KernelBench protocol (mean of 100 after 3 warm-ups, L2 flush) vs ours",
                 ["task", "KB mean ms", "KB median ms", "our median ms", "our IQR ms", "ours vs KB %"], rows)
    return text, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="skip the slow default load_inline build")
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--cache", default=None, help="build cache folder (default: a fresh temporary one)")
    ap.add_argument("--skip", default="", help="comma list of: builds,eval,kb")
    ap.add_argument("--eval-cases", type=int, default=len(EVAL_CASES), help="how many of the eval cases")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    tmp = Path(tempfile.mkdtemp(prefix="ks-bench-"))
    cache = args.cache or str(tmp / "cache")
    results: dict = {}
    if "kb" not in skip:
        stage("KernelBench agreement: timing the reference tasks against KernelBench's own timer")
        text, results["kernelbench"] = bench_kernelbench_agreement()
        print(text, flush=True)
    if "eval" not in skip:
        stage(f"evaluation overhead: {min(args.eval_cases, len(EVAL_CASES))} cases x {args.repeats} repeats")
        text, results["eval"] = bench_eval(cache, args.repeats, EVAL_CASES[: args.eval_cases])
        print(text, flush=True)
    if "builds" not in skip:
        stage(f"build times: load_inline, fast path, {args.parallel} parallel builds")
        text, results["builds"] = bench_builds(tmp, cache, args.parallel, args.quick)
        print(text, flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
