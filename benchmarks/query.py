"""Query latency: ``kernelskill.query`` in process on KBs of growing size, and one cold CLI call.

    /work/venv/bin/python benchmarks/query.py [--sizes 100,10000,100000] [--rounds 20] [--cold-runs 5]
                                              [--work DIR] [--skip-cold]
    /work/venv/bin/python benchmarks/query.py --heldout HOME   # agreement with tests/data/heldout labels

For each size N the KB is the bundled skills plus N synthetic decision cases and N synthetic skill docs
(random bottleneck, tiers, structures, gates and methods), ingested into a real store (DuckDB file +
Chroma collection + the bundled MiniLM). To keep the set-up affordable the synthetic docs draw their
text from a pool of 1,000 distinct texts, so only 1,000 are encoded; Chroma still indexes N vectors.

Columns:
- ``query p50/p95 ms``: the full ``query()`` (features, profile import, rules, SQL gating, doc
  search, result) over the five examples with and without their profiles, warm process; the query
  text of a repeated situation hits the embedding cache, as the planner's repeated queries do;
- ``features / profile / decide / rank ms``: medians of the phases;
- ``fresh search p50 ms``: ``store.search_docs`` with a text never seen before (one MiniLM encode + the
  exact search over the doc vectors' mirror, or Chroma above ``embed.exact_search_max_docs``), the extra
  cost of a new situation;
- cold CLI: wall and CPU time of a new process running ``kernelskill query`` once, on a home with the
  bundled KB (built before, plus one untimed call per kind). Three kinds of call, human and ``--json``
  output: a repeated situation (its doc search answer is read from ``<kb>/search_cache.sqlite``); a
  first-seen situation (that file removed before each call, so the search runs: exact search over the
  doc vectors' mirror, or Chroma above ``embed.exact_search_max_docs``); a new query text (also its
  embedding removed from ``<kb>/embed_cache.sqlite``, so MiniLM encodes it). The KB reads come from the
  read copy the ingest wrote (``<kb>/reads/``; DuckDB is not opened); one more row moves that copy aside,
  as for a KB written before it existed, so that the store answers a first-seen situation's reads. The
  package's bytecode is compiled first, as an install does (with ``PYTHONDONTWRITEBYTECODE`` set, a stale
  ``.pyc`` would be recompiled by every call).
Goals on the 2-core CI machine: p50 <= 20 ms at 10k and <= 60 ms at 100k (warm); cold CLI <= 1 s.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT.parent))

from _stages import stage  # noqa: E402

from kernelskill.config import load_settings  # noqa: E402
from kernelskill.kb.curate import bundled_skills_dir  # noqa: E402
from kernelskill.kb.embed import CACHE_NAME, Embedder, EmbeddingCache  # noqa: E402
from kernelskill.kb.home import open_store  # noqa: E402
from kernelskill.kb.loader import Location, load_skills  # noqa: E402
from kernelskill.kb.schema import Case, SkillDoc  # noqa: E402
from kernelskill.kb.store import KBStore  # noqa: E402
from kernelskill.retrieval.api import clear_caches, query  # noqa: E402
from kernelskill.retrieval.search_cache import CACHE_NAME as SEARCH_CACHE  # noqa: E402

try:  # a tree before the read copy (to time it against this one): its row is skipped
    from kernelskill.kb.read_copy import COPY_DIR  # noqa: E402
except ImportError:
    COPY_DIR = None

EX = ROOT / "examples"
NOT_PACKAGE = re.compile(r"[/\\](tests|benchmarks|examples|\.device|\.git|\.whl)[/\\]")  # not compiled
POOL = 1000
WORDS = ("memory bandwidth coalesced access shared memory tile warp shuffle reduction tensor core occupancy "
         "register pressure latency stall long scoreboard l2 cache dram vectorized float4 loads unroll loop "
         "fusion epilogue gemm convolution stencil softmax layernorm atomic privatization launch overhead "
         "cuda graphs persistent kernel split-k bank conflicts padding swizzle async copy pipeline double "
         "buffering tail handling predication divergence branch uniform").split()


def synthetic(n: int, seed: int = 0):
    rng = random.Random(seed)
    skills = load_skills([bundled_skills_dir()])
    methods = [m.id for m in skills.methods]
    bns = [b.id for b in skills.bottlenecks]
    tiers = [t.id for t in skills.tiers]
    preds = [p.id for p in skills.predicates]
    pool = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) for _ in range(POOL)]
    where = Location("<synthetic>", 0)
    for i in range(n):
        skills.add("docs", SkillDoc(
            id=f"syn.doc.{i:06d}", method=rng.choice(methods), title=f"Synthetic note {i % POOL}", text=pool[i % POOL],
            kind=rng.choice(["guidance", "case_study", "pitfall"]), bottlenecks=rng.sample(bns, rng.randint(0, 2)),
            tiers=rng.sample(tiers, rng.randint(0, 2)), structures=sorted(rng.sample(range(5), rng.randint(0, 2)))),
            where)
        skills.add("cases", Case(
            id=f"syn.case.{i:06d}", title=f"Synthetic case {i}", bottleneck=rng.choice(bns),
            tiers=rng.sample(tiers, rng.randint(0, 2)), structures=sorted(rng.sample(range(5), rng.randint(0, 2))),
            when=rng.sample(preds, rng.randint(1, 3)), methods=rng.sample(methods, rng.randint(2, 5)),
            rationale="synthetic", priority=rng.randint(100, 999)), where)
    return skills


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def examples() -> list[dict]:
    return json.loads((EX / "manifest.json").read_text())["examples"]


def run_size(n: int, rounds: int, work: Path, embedder: Embedder) -> dict:
    home = work / f"home-{n}"
    settings = load_settings(home=home)
    store = KBStore.open(settings.kb_dir, embedder=embedder)
    t0 = time.perf_counter()
    if store.is_empty():
        store.ingest(synthetic(n), check=False)
    build_s = time.perf_counter() - t0
    counts = store.counts()
    jobs = [(EX / e["kernel"], EX / e["task"], EX / e["profile"] if with_prof else None)
            for e in examples() for with_prof in (True, False)]
    stage(f"size {n}: KB ready in {build_s:.1f} s; warm-up, then {rounds} rounds of {len(jobs)} queries")
    for kernel, task, prof in jobs:  # warm-up: imports, caches, query embeddings
        query(kernel, task=task, profile=prof, settings=settings, store=store)
    totals: list[float] = []
    phases: dict[str, list[float]] = {}
    for _ in range(rounds):
        for kernel, task, prof in jobs:
            t = time.perf_counter()
            r = query(kernel, task=task, profile=prof, settings=settings, store=store)
            totals.append((time.perf_counter() - t) * 1000)
            for key, v in r.timings_ms.items():
                phases.setdefault(key, []).append(v)
    stage(f"size {n}: first-seen queries (memos cleared), then fresh-text searches")
    first: list[float] = []
    first_phases: dict[str, list[float]] = {}
    for _ in range(max(1, rounds // 4)):
        for kernel, task, prof in jobs:
            clear_caches(rules=False)  # a situation not seen before: no memo of features, profile, reads
            t = time.perf_counter()
            r = query(kernel, task=task, profile=prof, settings=settings, store=store)
            first.append((time.perf_counter() - t) * 1000)
            for key, v in r.timings_ms.items():
                first_phases.setdefault(key, []).append(v)
    fresh: list[float] = []
    rng = random.Random(time.time_ns())  # texts never seen before, also across runs (no cache hits)
    some = [m.id for m in store.methods()][:8]
    for i in range(20):
        text = f"new situation {rng.random()} {i} " + " ".join(rng.choice(WORDS) for _ in range(40))
        t = time.perf_counter()
        store.search_docs(text, k=8, methods=some)
        fresh.append((time.perf_counter() - t) * 1000)
    store.close()
    return {"n": n, "cases": counts.get("cases"), "docs": counts.get("docs"), "build_s": build_s,
            "p50": statistics.median(totals), "p95": pct(totals, 0.95), "queries": len(totals),
            **{f"{k}_ms": statistics.median(v) for k, v in phases.items() if k != "total"},
            "first_p50": statistics.median(first), "first_p95": pct(first, 0.95),
            **{f"first_{k}_ms": statistics.median(v) for k, v in first_phases.items() if k != "total"},
            "fresh_p50": statistics.median(fresh), "fresh_p95": pct(fresh, 0.95)}


def _forget_answers(kb_dir: Path, text_key: str | None) -> None:
    """Empty the doc-search answer cache and, given ``text_key``, drop one query text's embedding."""
    (kb_dir / SEARCH_CACHE).unlink(missing_ok=True)
    if text_key is not None and (kb_dir / CACHE_NAME).is_file():
        db = sqlite3.connect(str(kb_dir / CACHE_NAME))
        with db:
            db.execute("DELETE FROM vectors WHERE key = ?", (text_key,))
        db.close()


def cold_cli(home: Path, runs: int) -> list[tuple[str, float, float, float]]:
    compileall.compile_dir(str(ROOT), quiet=1, rx=NOT_PACKAGE)
    exe = Path(sys.executable).with_name("kernelskill")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "kernelskill"]
    e = examples()[0]
    with_prof = ["query", str(EX / e["kernel"]), "--profile", str(EX / e["profile"])]
    settings = load_settings(home=home)
    text = query(EX / e["kernel"], profile=EX / e["profile"], settings=settings).query_text
    text_key = EmbeddingCache.key(Embedder.get(settings.embed, cache_dir=settings.kb_dir).model_key, text)
    variants = {  # label: (arguments, what to forget before each call: None, "answers", "text")
        "query --profile (human)": (with_prof, None),
        "query --profile --json": (with_prof + ["--json"], None),
        "query static-only": (["query", str(EX / e["kernel"])], None),
        "query --profile, first-seen situation": (with_prof, "answers"),
        "query --profile --json, first-seen situation": (with_prof + ["--json"], "answers"),
        "query --profile, new query text": (with_prof, "text"),
        "query --profile --json, new query text": (with_prof + ["--json"], "text"),
        "query --profile, first-seen situation, no read copy": (with_prof, "copy"),
    }
    out = []
    for label, (args, forget) in variants.items():
        if forget == "copy" and COPY_DIR is None:
            continue
        stage(f"cold CLI: {label}, {runs} new processes")
        walls, cpus = [], []
        aside = home / "reads.aside"
        if forget == "copy":
            shutil.move(str(settings.kb_dir / COPY_DIR), str(aside))
        try:
            for i in range(runs + 1):  # the first call is untimed (a KB rebuild or a cache fill lands there)
                if forget is not None:
                    _forget_answers(settings.kb_dir, text_key if forget == "text" else None)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t = time.perf_counter()
                proc = subprocess.run(base + args + ["--home", str(home)], capture_output=True, text=True)
                wall = time.perf_counter() - t
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if proc.returncode != 0:
                    raise SystemExit(f"{label} failed: {proc.stderr.strip()[-300:]}")
                if i > 0:
                    walls.append(wall)
                    cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        finally:
            if forget == "copy":
                shutil.move(str(aside), str(settings.kb_dir / COPY_DIR))
        out.append((label, statistics.median(walls), min(walls), statistics.median(cpus)))
    return out


def heldout(home: Path) -> None:
    """Agreement with the expert labels of tests/data/heldout (bottleneck, first method, must-not)."""
    import yaml
    from rich.console import Console
    from rich.table import Table

    root = ROOT / "tests" / "data" / "heldout"
    labels = yaml.safe_load((root / "labels.yaml").read_text())["kernels"]
    settings = load_settings(home=home)
    t = Table(title="held-out kernels: query vs expert labels")
    for col in ("kernel", "bottleneck", "ok", "first (profile)", "ok", "first (static)", "ok", "must-not hit"):
        t.add_column(col)
    tally = {"b": 0, "f": 0, "s": 0, "m": 0}
    for lab in labels:
        kernel = root / "kernels" / f"{lab['id']}.py"
        r = query(kernel, profile=root / "profiles" / f"{lab['id']}.csv", settings=settings)
        st = query(kernel, settings=settings)
        first, sfirst = r.first_methods(3), st.first_methods(3)
        ok_b = r.bottleneck.id in lab["bottleneck"]
        ok_f = bool(first) and first[0] in lab["first"]
        ok_s = bool(sfirst) and sfirst[0] in lab.get("static_first", lab["first"])
        bad = sorted({m for m in r.first_methods(99) + st.first_methods(99) if m in lab.get("must_not", [])})
        tally["b"] += ok_b
        tally["f"] += ok_f
        tally["s"] += ok_s
        tally["m"] += bool(bad)
        t.add_row(lab["id"], str(r.bottleneck.id), "yes" if ok_b else "NO", ", ".join(first), "yes" if ok_f else "NO",
                  ", ".join(sfirst), "yes" if ok_s else "NO", ", ".join(bad))
    n = len(labels)
    con = Console(width=200)
    con.print(t)
    con.print(f"bottleneck {tally['b']}/{n}; first method in the expert's first set: {tally['f']}/{n} with the "
              f"profile, {tally['s']}/{n} static-only; kernels with a must-not method permitted: {tally['m']}/{n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,10000,100000")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--work", type=Path, default=None, help="keep the KBs here (reused on the next run)")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--heldout", type=Path, default=None, metavar="HOME",
                    help="only score the held-out kernels against their labels, with the KB of HOME")
    args = ap.parse_args()
    if args.heldout is not None:
        heldout(args.heldout)
        return
    from rich.console import Console
    from rich.table import Table

    work = args.work or Path(tempfile.mkdtemp(prefix="ks-query-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    embedder = Embedder(None, cache_dir=work / "embed-cache")
    con = Console(width=200)
    rows = []
    for n in [int(s) for s in args.sizes.split(",") if s]:
        stage(f"size {n}: building the KB (bundled skills + {n} synthetic docs and cases) and measuring")
        rows.append(run_size(n, args.rounds, work, embedder))
    t = Table(title="kernelskill query, in process, warm process (ms)")
    for col in ("synthetic N", "cases", "docs", "build s", "queries", "repeat p50", "repeat p95",
                "first-seen p50", "first-seen p95", "features", "profile", "decide", "rank",
                "fresh-text search p50", "p95"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(f"{r['n']:,}", f"{r['cases']:,}", f"{r['docs']:,}", f"{r['build_s']:.1f}", str(r["queries"]),
                  f"{r['p50']:.1f}", f"{r['p95']:.1f}", f"{r['first_p50']:.1f}", f"{r['first_p95']:.1f}",
                  f"{r.get('first_features_ms', 0):.1f}", f"{r.get('first_profile_ms', 0):.1f}",
                  f"{r.get('first_decide_ms', 0):.1f}", f"{r.get('first_rank_ms', 0):.1f}",
                  f"{r['fresh_p50']:.1f}", f"{r['fresh_p95']:.1f}")
    con.print(t)
    con.print("repeat: the same situation again (memoized reads, cached query embedding); first-seen: every "
              "in-process memo cleared before each query (phase columns are its medians); fresh-text search: "
              "store.search_docs on a text never embedded before (one MiniLM encode + the exact mirror search)")
    if not args.skip_cold:
        home = work / "home-cold"
        stage("cold CLI: building the bundled KB in its own home")
        open_store(load_settings(home=home)).close()
        load_before = os.getloadavg()[0]
        rows_cold = cold_cli(home, args.cold_runs)
        c = Table(title=f"cold CLI, one new process per call ({args.cold_runs} runs, s; load average "
                        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores)")
        for col in ("command", "median s", "min s", "median CPU s"):
            c.add_column(col, justify="right" if col != "command" else "left")
        for label, med, low, cpu in rows_cold:
            c.add_row(label, f"{med:.2f}", f"{low:.2f}", f"{cpu:.2f}")
        con.print(c)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
