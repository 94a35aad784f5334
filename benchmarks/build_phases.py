"""Cold ``load_inline`` builds through the fast route, with and without the precompiled host prelude.

    python benchmarks/build_phases.py [--repeats N] [--cases FILE.py ...] [--json OUT]
    python benchmarks/build_phases.py --end-to-end [--base REV] [--repeats N] ...

Each case is a candidate file that calls ``load_inline`` (default: three of ``tests/corpus``); its
arguments are read in a separate process (the candidate's code never runs here).

Default (phases): the working tree's ``nvcc -dryrun`` listing of each case's build is run one step at a
time (nothing else of ours running; its CPU seconds, which a busy machine disturbs less than wall
time), as ``base`` (every step as listed: what the harness did before the
precompiled prelude) and as ``new`` (the host compile includes the precompiled prelude), the two
alternating, ``--repeats`` times. Per phase the median seconds, and the build's wall time as the harness
runs it with a core per chain: host chain (preprocessor + cudafe++) and device chain (preprocessor +
cicc + ptxas + fatbinary) side by side, then the host compile and the link. Measuring steps alone keeps
the figures comparable on a busy machine with few cores.

``--end-to-end``: real ``build_fast`` calls, ``pipeline/harness`` at ``--base`` (default ``HEAD``, loaded
from git) against the working tree, with and without the precompiled prelude
(``KERNELSKILL_HARNESS_NO_HOST_PCH=1``), wall and CPU seconds; on a machine with fewer than about four
free cores the two chains compete and wall times say little.

The precompiled prelude is created once before the timed builds (once per box, like the trampoline) and
shown apart. No GPU needed: nvcc and torch's headers are.
"""

from __future__ import annotations

import argparse
import contextlib
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
from _table import table as _table  # noqa: E402

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
    return _table(title, header, rows, digits=2)


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


def nvcc_command(fast: Any, params: dict[str, Any], root: Path) -> list[str]:
    """The nvcc command ``build_fast`` would run for these arguments (its unit written under ``root``)."""

    class Got(Exception):
        pass

    def grab(cmd: list[str], folder: Path, phases: Any = None) -> Any:
        raise Got(cmd)

    real, fast.run_nvcc = fast.run_nvcc, grab
    try:
        fast.build_fast(dict(params), Path(tempfile.mkdtemp(dir=root)))
    except Got as got:
        return list(got.args[0])
    finally:
        fast.run_nvcc = real
    raise RuntimeError("build_fast did not call nvcc")


def _tool(step: str) -> str:
    return step.split()[0].strip('"').rsplit("/", 1)[-1]


def run_steps(fast: Any, cmd: list[str], root: Path, use_pch: bool) -> dict[str, Any]:
    """Every step of the build alone, its CPU seconds; with ``use_pch`` the host compile includes the precompiled
    prelude (created first, untimed, when missing)."""
    from kernelskill.pipeline.harness.host_pch import HostPrelude

    plan = fast.split_dryrun(cmd)
    if plan is None:
        raise RuntimeError("unexpected nvcc -dryrun listing")
    variables, host, device, rest = plan
    head = fast.script_head(variables)
    temps = {Path(p) for p in fast.NVCC_TEMP_RE.findall("\n".join(host + device + rest))}
    times: dict[str, float] = {}

    def run(step: str, phase: str) -> subprocess.CompletedProcess[str]:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(["bash", "-c", head + step], capture_output=True, text=True, timeout=900)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # CPU seconds: what the step costs on a free core
        times[phase] = times.get(phase, 0.0) + (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        if done.returncode:
            raise RuntimeError(f"{_tool(step)} failed: {(done.stdout + done.stderr)[-2000:]}")
        return done

    out: dict[str, Any] = {"host_pch": "off"}
    try:
        run(host[0], "host cpp")
        run(host[1], "cudafe++")
        for step in device:
            tool = _tool(step)
            run(step, {"gcc": "device cpp", "g++": "device cpp", "cicc": "cicc"}.get(tool, "ptxas+fatbinary"))
        for i, step in enumerate(rest):
            if i == 0 and use_pch:
                prelude = HostPrelude.find(host[1], step, Path(os.environ["KERNELSKILL_HARNESS_HOST_PCH_DIR"]))
                if prelude is not None and not prelude.usable():
                    t0 = time.perf_counter()

                    def start(steps: list[str], name: str) -> subprocess.Popen[str]:
                        return subprocess.Popen(["bash", "-c", head + "\n".join(steps)], stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, text=True)

                    creating = prelude.start_creating(start)
                    if creating is not None:
                        creating.finish()
                    out["pch_create_s"] = time.perf_counter() - t0
                if prelude is not None and prelude.usable():
                    prelude.rewrite()
                    out["host_pch"] = "used"
            run(step, "host compile" if i == 0 else "link")
    finally:
        for path in temps:
            with contextlib.suppress(OSError):
                path.unlink()
    h = times["host cpp"] + times["cudafe++"]
    d = times["device cpp"] + times["cicc"] + times.get("ptxas+fatbinary", 0.0)
    out.update(times)
    out["wall, a core per chain"] = max(h, d) + times["host compile"] + times["link"]
    out["sum of steps"] = sum(times.values())
    return out


PHASES = ["host cpp", "cudafe++", "device cpp", "cicc", "ptxas+fatbinary", "host compile", "link",
          "wall, a core per chain", "sum of steps"]


def phases_main(args: argparse.Namespace, work: Path) -> str:
    from kernelskill.pipeline.harness import inline_fast as fast

    cases = {p.stem: capture(p) for p in args.cases}
    cmds = {name: nvcc_command(fast, params, work) for name, params in cases.items()}
    first_name = next(iter(cmds))
    stage(f"precompiling the host prelude (once per box): {first_name}")
    first = run_steps(fast, cmds[first_name], work, use_pch=True)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {c: {"base": [], "new": []} for c in cmds}
    for rep in range(args.repeats):
        for name, cmd in cmds.items():
            for v in (["base", "new"] if rep % 2 == 0 else ["new", "base"]):
                stage(f"repeat {rep + 1}/{args.repeats} {name} {v}")
                results[name][v].append(run_steps(fast, cmd, work, use_pch=v == "new"))
    out = [f"# python benchmarks/build_phases.py --repeats {args.repeats}: every nvcc step run alone, its CPU "
           f"seconds (user+sys), medians of {args.repeats}; 'wall, a core per chain' = max(host chain, device "
           "chain) + host compile + link\n",
           table("One-off", ["what", "seconds"],
                 [[f"precompiling the host prelude (gcc, {first_name}'s unit)", first.get("pch_create_s", 0.0)]])]
    summary = []
    for name in cmds:
        b = {k: statistics.median(r[k] for r in results[name]["base"]) for k in PHASES}
        n = {k: statistics.median(r[k] for r in results[name]["new"]) for k in PHASES}
        used = ",".join(sorted({r["host_pch"] for r in results[name]["new"]}))
        out.append(table(f"{name} (new: host pch {used})", ["phase", "base", "new", "new/base"],
                         [[k, b[k], n[k], n[k] / b[k] if b[k] else "-"] for k in PHASES]))
        summary.append([name, b["wall, a core per chain"], n["wall, a core per chain"],
                        n["wall, a core per chain"] / b["wall, a core per chain"],
                        b["sum of steps"], n["sum of steps"], n["sum of steps"] / b["sum of steps"]])
    summary.append(["MEDIAN over cases", *[statistics.median(r[i] for r in summary) for i in range(1, 7)]])
    out.append(table("Summary: cold build, new / base", ["case", "base wall", "new wall", "new/base wall",
                                                          "base steps", "new steps", "new/base steps"], summary))
    if args.json:
        args.json.write_text(json.dumps({"first": first, "results": results, "summary": summary}, indent=1))
    return "\n".join(out)


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


def end_to_end_main(args: argparse.Namespace, work: Path) -> str:
    from kernelskill.pipeline.harness import inline_fast as new

    variants = {"new-nopch": (new, {"KERNELSKILL_HARNESS_NO_HOST_PCH": "1"}), "new": (new, {})}
    if "base" in args.variants.split(","):  # needs the git history (a copy of the work tree has none)
        variants["base"] = (load_base(args.base, work / "base"), {})
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

    def med(runs: list[dict[str, Any]], key: str) -> float | str:
        vals = [r["phases"][key] if key in r["phases"] else r.get(key) for r in runs]
        vals = [v for v in vals if isinstance(v, int | float)]
        return statistics.median(vals) if vals else "-"

    base = f" --base {args.base}" if "base" in variants else ""
    out = [f"# python benchmarks/build_phases.py --end-to-end{base} --variants {','.join(order)} --repeats {args.repeats}"
           f" ({len(cases)} cases, medians of {args.repeats}; seconds)\n",
           table("One-off", ["what", "wall", "cpu", "host pch"],
                 [[f"first build with the host prelude precompiled ({first_name})", first["wall_s"],
                   first["cpu_s"], first["phases"].get("host_pch", "-")]])]
    summary: list[list[Any]] = []
    for name in cases:
        rows = []
        for v in order:
            runs = results[name][v]
            pch = ",".join(sorted({str(r["phases"].get("host_pch", "-")) for r in runs}))
            rows.append([v, med(runs, "wall_s"), med(runs, "cpu_s"), med(runs, "host_chain_s"),
                         med(runs, "device_chain_s"), med(runs, "host_compile_s"), med(runs, "rest_s"), pch])
        out.append(table(name, ["variant", "wall", "cpu", "host chain (cpp+cudafe++)", "device chain (cpp+cicc+ptxas)",
                                "host compile (with pch)", "rest", "host pch"], rows))
        ref = "base" if "base" in order else "new-nopch"
        if ref in order and "new" in order:
            b, n = med(results[name][ref], "wall_s"), med(results[name]["new"], "wall_s")
            bc, nc = med(results[name][ref], "cpu_s"), med(results[name]["new"], "cpu_s")
            summary.append([name, b, n, n / b, bc, nc, nc / bc])  # type: ignore[operator]
    if summary:
        summary.append(["MEDIAN over cases", *[statistics.median(r[i] for r in summary) for i in range(1, 7)]])
        out.append(table(f"Summary: cold build, new / {ref}", ["case", f"{ref} wall", "new wall", f"new/{ref} wall",
                                                                 f"{ref} cpu", "new cpu", f"new/{ref} cpu"], summary))
    if args.json:
        args.json.write_text(json.dumps({"first": first, "results": results, "summary": summary}, indent=1))
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--end-to-end", action="store_true", help="real build_fast calls against --base")
    ap.add_argument("--base", default="HEAD", help="--end-to-end: git revision of the old harness (default HEAD)")
    ap.add_argument("--variants", default="base,new-nopch,new", help="--end-to-end: comma list of base,new-nopch,new")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", nargs="*", type=Path, default=[ROOT / "tests" / "corpus" / c for c in DEFAULT_CASES])
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
        print(end_to_end_main(args, work) if args.end_to_end else phases_main(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
