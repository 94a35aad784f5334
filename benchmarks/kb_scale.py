"""KB scale: ingest throughput and warm search latency on synthetic KBs (real DuckDB, Chroma, embedder).

    /work/venv/bin/python benchmarks/kb_scale.py [--sizes 1000,10000] [--queries 200] [--keep DIR]

For each size N the KB holds the small test skill set plus N synthetic skill docs and N synthetic cases.
Columns:
- ``encode docs/s``: first ingest into an empty KB with an empty embedding cache (lint + encode +
  DuckDB + Chroma), docs per second end to end;
- ``store docs/s``: ingest of the same content into a second empty KB whose embedding cache already
  holds the vectors (what ``kb init`` costs after the first time, and what a re-ingest of a KB where
  few docs changed costs): lint + DuckDB + Chroma;
- ``noop s``: a second ingest of unchanged content (must write nothing);
- ``search p50/p95 ms``: ``store.search_docs`` warm in process (query text not cached: each query is
  encoded by the numpy encoder, then Chroma + the DuckDB lookup); ``numpy-query p50``: the same
  through a second, read-only store handle with an explicitly numpy embedder; ``filtered p50``:
  with a method + bottleneck ``where`` (query texts cached); ``cases_for p50`` (SQL filtering).
Goals on the 2-core CI machine: ingest >= 500 docs/s, search p50 <= 20 ms at 10k docs.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _stages import stage
from rich.console import Console
from rich.table import Table

from kernelskill.kb.embed import Embedder
from kernelskill.kb.loader import load_skills
from kernelskill.kb.schema import Case, SkillDoc
from kernelskill.kb.store import KBStore

ROOT = Path(__file__).resolve().parents[1]

SMALL = ROOT / "tests" / "data" / "skills_small"
WORDS = ("memory bandwidth coalesced access shared memory tile warp shuffle reduction tensor core occupancy "
         "register pressure latency stall long scoreboard l2 cache dram vectorized float4 loads unroll loop "
         "fusion epilogue gemm convolution stencil softmax layernorm atomic privatization launch overhead "
         "cuda graphs persistent kernel split-k bank conflicts padding swizzle async copy pipeline double "
         "buffering tail handling predication divergence branch uniform").split()


def synthetic(n: int, seed: int = 0):
    rng = random.Random(seed)
    skills = load_skills([SMALL])
    methods = [m.id for m in skills.methods]
    bns = [b.id for b in skills.bottlenecks]
    tiers = [t.id for t in skills.tiers]
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
        doc = SkillDoc(id=f"doc.synthetic.{i:06d}", method=rng.choice(methods), title=f"Synthetic note {i}",
                       text=text, kind=rng.choice(["guidance", "case_study", "pitfall"]),
                       bottlenecks=rng.sample(bns, rng.randint(0, 2)), tiers=rng.sample(tiers, rng.randint(0, 2)),
                       structures=sorted(rng.sample(range(5), rng.randint(0, 2))))
        skills.add("docs", doc, skills.locations[methods[0]])
        case = Case(id=f"case.synthetic.{i:06d}", title=f"Synthetic case {i}", bottleneck=rng.choice(bns),
                    tiers=rng.sample(tiers, rng.randint(0, 2)), structures=sorted(rng.sample(range(5), rng.randint(0, 2))),
                    methods=rng.sample(methods, rng.randint(1, 3)), rationale="synthetic", priority=rng.randint(1, 500))
        skills.add("cases", case, skills.locations["case.fallback"])
    return skills


def percentile(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def prefill(emb: Embedder, texts: list[str], seed: int = 0) -> None:
    """Put random unit vectors for ``texts`` into the embedding cache (``--store-only``: the model never
    runs, so the store's own scaling is measured at sizes where encoding would take an hour)."""
    import numpy as np

    from kernelskill.kb.embed import EmbeddingCache

    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((len(texts), 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    emb.cache.put_many({EmbeddingCache.key(emb.model_key, t): v.tobytes() for t, v in zip(texts, vecs, strict=True)})


def run_size(n: int, queries: int, workdir: Path, store_only: bool = False) -> dict[str, float]:
    from kernelskill.kb.store import doc_embed_text

    stage(f"N={n}: building {n} synthetic docs and cases")
    skills = synthetic(n)
    docs = len(skills.docs)
    cache = workdir / f"cache-{n}"
    emb = Embedder(None, cache_dir=cache)
    if store_only:
        prefill(emb, [doc_embed_text(d) for d in skills.docs])
    store = KBStore.open(workdir / f"kb-{n}", embedder=emb)
    stage(f"N={n}: first ingest ({docs} docs to encode unless cached, DuckDB + Chroma)")
    t = time.perf_counter()
    store.ingest(skills)
    first = time.perf_counter() - t
    stage(f"N={n}: first ingest took {first:.1f} s; unchanged re-ingest")
    t = time.perf_counter()
    report = store.ingest(skills)
    noop = time.perf_counter() - t
    assert not report.changed
    emb2 = Embedder(None, cache_dir=cache)
    store2 = KBStore.open(workdir / f"kb2-{n}", embedder=emb2)
    stage(f"N={n}: ingest into a second KB with the embeddings cached")
    t = time.perf_counter()
    store2.ingest(skills)
    warm = time.perf_counter() - t
    assert emb2.encoded == 0
    stage(f"N={n}: {queries} searches, then numpy-encoder, filtered and SQL timings")
    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(8)) + f" q{i}" for i in range(queries + 5)]
    for q in texts[:5]:
        store.search_docs(q, k=5)
    lat = []
    for q in texts[5:]:
        t = time.perf_counter()
        hits = store.search_docs(q, k=5)
        lat.append((time.perf_counter() - t) * 1000)
        assert hits
    np_store = KBStore.open(store.kb_dir, read_only=True, embedder=Embedder(None, backend="numpy"))
    np_lat = []
    for i, q in enumerate(texts[5:55]):
        t = time.perf_counter()
        np_store.search_docs(q + f" numpy{i}", k=5)
        np_lat.append((time.perf_counter() - t) * 1000)
    filt = []
    methods = ["coalesced_access", "tensor_core_mma"]
    for q in texts[5:25]:
        t = time.perf_counter()
        store.search_docs(q, k=5, methods=methods, bottleneck="memory_bandwidth")
        filt.append((time.perf_counter() - t) * 1000)
    sql = []
    for i in range(50):
        t = time.perf_counter()
        store.cases_for("memory_bandwidth", ["tier.high", "tier.mid", "tier.low"][i % 3], i % 5)
        sql.append((time.perf_counter() - t) * 1000)
    return {"docs": docs, "cases": len(skills.cases), "encode_dps": docs / first, "first_s": first,
            "store_dps": docs / warm, "warm_s": warm, "noop_s": noop, "p50": statistics.median(lat),
            "p95": percentile(lat, 0.95), "numpy_p50": statistics.median(np_lat), "filtered_p50": statistics.median(filt),
            "cases_for_p50": statistics.median(sql), "torch_encoded": emb.encoded_by["torch"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated N (e.g. 1000,10000,100000)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None, help="keep the KBs in this folder")
    parser.add_argument("--store-only", action="store_true",
                        help="pre-fill the embedding cache with random vectors: measure the store, not the model")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="kb-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    table = Table(title="KB scale (synthetic docs + cases; 2-core box; goals: ingest >= 500 docs/s, "
                        "search p50 <= 20 ms at 10k)")
    for col in ("N", "docs", "cases", "first ingest s", "encode docs/s", "cached ingest s", "store docs/s",
                "noop s", "search p50 ms", "p95 ms", "numpy-query p50 ms", "filtered p50 ms", "cases_for p50 ms"):
        table.add_column(col, justify="right")
    try:
        for n in sizes:
            r = run_size(n, args.queries, workdir, args.store_only)
            table.add_row(str(n), str(r["docs"]), str(r["cases"]), f"{r['first_s']:.1f}", "-" if args.store_only else f"{r['encode_dps']:.0f}",
                          f"{r['warm_s']:.1f}", f"{r['store_dps']:.0f}", f"{r['noop_s']:.2f}", f"{r['p50']:.1f}",
                          f"{r['p95']:.1f}", f"{r['numpy_p50']:.1f}", f"{r['filtered_p50']:.1f}", f"{r['cases_for_p50']:.2f}")
            stage(f"N={n} done ({r['torch_encoded']} docs encoded by the torch bulk path)")
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    Console(width=200).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
