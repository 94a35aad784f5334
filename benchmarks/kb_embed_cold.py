"""Cold-process cost of encoding one query: numpy path, cache hit, sentence-transformers, CLI search.

    /work/venv/bin/python benchmarks/kb_embed_cold.py [--runs 5]

Each row starts fresh Python processes (``--runs`` of them) and reports the median and max wall time
of the whole process (interpreter start, imports, model load, encode). The ``kb search`` row runs the
real CLI against a KB built from tests/data/skills_small. The goal for a cold ``kernelskill
query`` is <= 2 s on this 2-core machine; torch + sentence-transformers alone cost several seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _stages import stage
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests" / "data" / "skills_small"

ENCODE = """
import sys
from kernelskill.kb.embed import Embedder
e = Embedder.get(None, cache_dir={cache!r}, backend={backend!r})
v = e.encode([{text!r}])
assert len(v[0]) == 384
print("torch" in sys.modules, e.encoded)
"""


def _time(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed: {proc.stderr.strip().splitlines()[-1:]}")
    return wall, proc.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kb-cold-"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    py = sys.executable
    cli = [py, "-m", "kernelskill"]
    rows: list[tuple[str, list[float], str]] = []
    try:
        def encode_row(label: str, backend: str, same_text: bool) -> None:
            stage(f"{label}: {args.runs} new processes")
            cache = str(work / f"cache-{backend}")
            walls, notes = [], ""
            if same_text:  # warm the cache once
                _time([py, "-c", ENCODE.format(cache=cache, backend=backend, text="cached query")], env)
            for i in range(args.runs):
                text = "cached query" if same_text else f"coalesced float4 loads for a memory-bound kernel {i}"
                wall, out = _time([py, "-c", ENCODE.format(cache=cache, backend=backend, text=text)], env)
                walls.append(wall)
                notes = f"torch imported={out.split()[0]}, encoded={out.split()[1]}"
            rows.append((label, walls, notes))

        stage(f"python + import kernelskill: {args.runs} new processes")
        base = [py, "-c", "import kernelskill"]
        rows.append(("python + import kernelskill", [_time(base, env)[0] for _ in range(args.runs)], "baseline"))
        encode_row("encode 1 query, numpy (cache miss)", "auto", False)
        encode_row("encode 1 query, cache hit", "auto", True)
        encode_row("encode 1 query, sentence-transformers", "torch", False)
        home = work / "home"
        stage("kb init of the small skill set, then the cold kb search CLI")
        _time([*cli, "kb", "init", "--home", str(home), "--skills", str(SMALL)], env)
        walls = []
        for i in range(args.runs):
            walls.append(_time([*cli, "kb", "search", f"strided transpose writes {i}", "--home", str(home),
                                "--json"], env)[0])
        rows.append(("CLI: kernelskill kb search (cold, miss)", walls, "DuckDB + Chroma + numpy encoder"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"cold process wall time, {args.runs} runs each (2-core box)")
    for col in ("what", "median s", "max s", "notes"):
        table.add_column(col)
    for label, walls, notes in rows:
        table.add_row(label, f"{statistics.median(walls):.2f}", f"{max(walls):.2f}", notes)
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
