"""Cold ``load_inline`` builds through the fast route: a base revision's harness against the working tree's.

    python benchmarks/build_phases.py [--base REV] [--repeats N] [--cases FILE.py ...] [--json OUT]

Each case is a candidate file that calls ``load_inline`` (default: three of ``tests/corpus``); its
arguments are read in a separate process (the candidate's code never runs here). Every repeat builds each
case cold, once per variant, in a fresh folder, the variants' order alternating between repeats:

* ``base``: ``pipeline/harness`` as it is at ``--base`` (default ``HEAD``), loaded from git;
* ``new, no host pch``: the working tree with ``KERNELSKILL_HARNESS_NO_HOST_PCH=1``;
* ``new``: the working tree as it runs in the harness.

Before the timed builds, one ``new`` build creates the precompiled host prelude (once per box, like the
trampoline; shown apart). Prints one table per case (medians: wall and CPU seconds of the build, and the
phases the working tree records: nvcc's host chain and device chain, run side by side, the host compile,
the link) and a summary with new / base. No GPU needed: nvcc and torch's headers are.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _stages import stage  # noqa: E402

DEFAULT_CASES = ["elementwise_relu.py", "layernorm_two_pass.py", "conv2d_naive_nchw.py"]

#: run in a child process: the load_inline arguments a candidate file passes (its code runs there only)
_CAPTURE = r"""
import inspect, json, runpy, sys
from torch.utils import cpp_extension as ce
sig = inspect.signature(ce.load_inline)
calls = []
class _Any:
    def __getattr__(self, name):
        return lambda *a, **k: None
def fake(*args, **kwargs):
    params = dict(sig.bind(*args, **kwargs).arguments)
    calls.append({k: v for k, v in params.items() if isinstance(v, (str, list, tuple, bool, int, type(None)))})
    return _Any()
ce.load_inline = fake
try:
    runpy.run_path(sys.argv[1], run_name="candidate")
except Exception:
    pass
print(json.dumps(calls))
"""


def table(title: str, header: list[str], rows: list[list[object]]) -> str:
    cells = [header] + [[f"{c:.2f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells[1:]]
    return "\n".join(lines) + "\n"


def capture(path: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _CAPTURE, str(path)], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    calls = json.loads(out.strip().splitlines()[-1])
    if not calls:
        raise SystemExit(f"{path}: no load_inline call")
    return calls[0]


def load_base(rev: str, into: Path) -> Any:
    """``pipeline/harness`` at ``rev`` as the package ``ks_base_harness`` (its inline_fast module)."""
    pkg = into / "ks_base_harness"
    pkg.mkdir(parents=True)
    names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{rev}:pipeline/harness"],
                           capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:pipeline/harness/{name}"],
                                  capture_output=True, text=True, check=True).stdout
            (pkg / name).write_text(text)
    spec = importlib.util.spec_from_file_location("ks_base_harness", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ks_base_harness"] = module
    spec.loader.exec_module(module)
    return importlib.import_module("ks_base_harness.inline_fast")


def timed_build(fast: Any, params: dict[str, Any], root: Path, env: dict[str, str]) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(dir=root))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        _module, info = fast.build_fast(dict(params), folder)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(folder, ignore_errors=True)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "phases": info.get("phases") or {}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="HEAD", help="git revision of the old harness (default HEAD)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", nargs="*", type=Path,
                    default=[ROOT / "tests" / "corpus" / c for c in DEFAULT_CASES])
    ap.add_argument("--variants", default="base,new-nopch,new", help="comma list of base,new-nopch,new")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from torch.utils import cpp_extension as ce

    if ce.CUDA_HOME is None:  # a CPU-only torch: point it at the nvcc on PATH (compiling needs no GPU)
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            raise SystemExit("no nvcc")
        ce.CUDA_HOME = os.environ.get("CUDA_HOME") or str(Path(os.path.realpath(nvcc)).parent.parent)
    work = Path(tempfile.mkdtemp(prefix="ks_build_phases_"))
    os.environ["KERNELSKILL_HARNESS_TRAMPOLINE_DIR"] = str(work / "trampoline")
    os.environ["KERNELSKILL_HARNESS_HOST_PCH_DIR"] = str(work / "host_pch")
    try:
        from kernelskill.pipeline.harness import inline_fast as new

        base = load_base(args.base, work / "base")
        variants = {"base": (base, {}), "new-nopch": (new, {"KERNELSKILL_HARNESS_NO_HOST_PCH": "1"}),
                    "new": (new, {})}
        order = [v for v in args.variants.split(",") if v in variants]
        cases = {p.stem: capture(p) for p in args.cases}
        stage("trampoline (once per box, not timed)")
        new.trampoline()
        first_name, first_params = next(iter(cases.items()))
        stage(f"first new build, creates the precompiled host prelude: {first_name}")
        first = timed_build(new, first_params, work, {})
        results: dict[str, dict[str, list[dict[str, Any]]]] = {c: {v: [] for v in order} for c in cases}
        for rep in range(args.repeats):
            for name, params in cases.items():
                for v in (order if rep % 2 == 0 else order[::-1]):
                    stage(f"repeat {rep + 1}/{args.repeats} {name} {v}")
                    fast, env = variants[v]
                    results[name][v].append(timed_build(fast, params, work, env))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(runs: list[dict[str, Any]], key: str) -> float | str:
        vals = [r["phases"][key] if key in r["phases"] else r.get(key) for r in runs]
        vals = [v for v in vals if isinstance(v, int | float)]
        return statistics.median(vals) if vals else "-"

    out = [f"# python benchmarks/build_phases.py --base {args.base} --repeats {args.repeats}"
           f" ({len(cases)} cases, medians of {args.repeats}; seconds)\n",
           table("One-off", ["what", "wall", "cpu", "host pch"],
                 [[f"first build with the host prelude precompiled ({first_name})", first["wall_s"],
                   first["cpu_s"], first["phases"].get("host_pch", "-")]])]
    summary = []
    for name in cases:
        rows = []
        for v in order:
            runs = results[name][v]
            pch = ",".join(sorted({str(r["phases"].get("host_pch", "-")) for r in runs}))
            rows.append([v, med(runs, "wall_s"), med(runs, "cpu_s"), med(runs, "host_chain_s"),
                         med(runs, "device_chain_s"), med(runs, "host_compile_s"), med(runs, "rest_s"), pch])
        out.append(table(f"{name}", ["variant", "wall", "cpu", "host chain (cpp+cudafe++)",
                                     "device chain (cpp+cicc+ptxas)", "host compile (with pch)", "rest",
                                     "host pch"], rows))
        if "base" in order and "new" in order:
            b, n = med(results[name]["base"], "wall_s"), med(results[name]["new"], "wall_s")
            bc, nc = med(results[name]["base"], "cpu_s"), med(results[name]["new"], "cpu_s")
            summary.append([name, b, n, n / b, bc, nc, nc / bc])  # type: ignore[operator]
    if summary:
        summary.append(["MEDIAN over cases", statistics.median(r[1] for r in summary),
                        statistics.median(r[2] for r in summary), statistics.median(r[3] for r in summary),
                        statistics.median(r[4] for r in summary), statistics.median(r[5] for r in summary),
                        statistics.median(r[6] for r in summary)])
        out.append(table("Summary: cold build, new / base", ["case", "base wall", "new wall", "new/base wall",
                                                              "base cpu", "new cpu", "new/base cpu"], summary))
    text = "\n".join(out)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"first": first, "results": results, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
