"""Capture the example ncu profiles on a CUDA machine (torch + standard library only).

For every example in ``examples/manifest.json`` this builds the kernel (``load_inline``, all examples in
parallel), then runs Nsight Compute over ONE forward of ``ModelNew`` (after warm-up forwards, bracketed by
``cudaProfilerStart/Stop`` and ``--profile-from-start off``) with the metric set that
``retrieval/field_map.yaml`` names, ``--clock-control none``. Each report is exported twice: base units
(``--print-units base``, the committed CSV) and, for one example, ncu's human units (to test the importer).

    python3 examples/capture_profiles.py --out /tmp/profiles [--only naive_gemm] [--deadline-s 150]

Internal child modes: ``--build-one KERNEL`` (import it, which builds it) and ``--run-one KERNEL TASK``
(one profiled forward).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIELD_MAP = HERE.parent / "retrieval" / "field_map.yaml"
METRIC_RE = re.compile(r"\b[a-z0-9]+__[a-z0-9_]+(?:\.[a-z0-9_]+)*")
MISSING_RE = re.compile(r"Failed to find metric\s+(?:regex:)?([A-Za-z0-9_.]+)")
HUMAN_UNITS_FOR = "naive_gemm"  # one report is also exported in ncu's human units


def _log(msg: str) -> None:
    print(f"[capture {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def wanted_metrics() -> list[str]:
    """Every raw ncu metric named in the field map (both spellings), in file order, no repeats."""
    seen: dict[str, None] = {}
    for line in FIELD_MAP.read_text().splitlines():
        text = line.split("#", 1)[0]
        for name in METRIC_RE.findall(text):
            seen.setdefault(name, None)
    return list(seen)


# ----------------------------------------------------------------------------------------- children
def build_one(kernel: str) -> None:
    _load_module(Path(kernel), "candidate")


def run_one(kernel: str, task: str) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    task_mod = _load_module(Path(task), "task")
    cand = _load_module(Path(kernel), "candidate")
    torch.manual_seed(42)
    model = cand.ModelNew(*task_mod.get_init_inputs()).cuda().eval()
    inputs = [x.cuda() if hasattr(x, "cuda") else x for x in task_mod.get_inputs()]
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


# ------------------------------------------------------------------------------------------- driver
def _ncu_path(given: str | None) -> str:
    for cand in (given, "/usr/local/cuda/bin/ncu", shutil.which("ncu")):
        if cand and Path(cand).exists():
            return cand
    sys.exit("ncu not found (pass --ncu PATH)")


def _filter_by_listing(ncu: str, metrics: list[str], log: list[str]) -> list[str]:
    """Drop metrics whose base name the chip does not know (cheap, no application run)."""
    try:
        proc = subprocess.run([ncu, "--query-metrics", "--chip", "gh100"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.append(f"query-metrics failed: {exc}")
        return metrics
    listing = proc.stdout
    if proc.returncode != 0 or "__" not in listing:
        log.append(f"query-metrics rc={proc.returncode}: {proc.stderr.strip()[:300]}")
        return metrics
    known = set(METRIC_RE.findall(listing))
    known_base = {k.split(".")[0] for k in known}
    if not {"launch__registers_per_thread", "gpu__time_duration"} <= known_base:
        log.append("query-metrics listing looks partial; not filtering by it")
        return metrics
    kept = [m for m in metrics if m.split(".")[0] in known_base]
    dropped = sorted(set(metrics) - set(kept))
    if dropped:
        log.append(f"not on gh100 (dropped before profiling): {dropped}")
    return kept


def _profile(ncu: str, ex: dict, metrics: list[str], out: Path, env: dict, log: list[str]) -> dict:
    name = ex["name"]
    rep = out / f"{name}.ncu-rep"
    child = [sys.executable, str(Path(__file__).resolve()), "--run-one",
             str(HERE / ex["kernel"]), str(HERE / ex["task"])]
    metrics = list(metrics)
    info: dict = {"name": name}
    for _attempt in range(6):
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
               "--metrics", ",".join(metrics), "-f", "-o", str(rep.with_suffix("")), *child]
        t0 = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        info["profile_s"] = round(time.time() - t0, 2)
        text = proc.stdout + proc.stderr
        (out / f"{name}.ncu.log").write_text(text)
        missing = [m for m in MISSING_RE.findall(text) if m in metrics]
        if missing:
            log.append(f"{name}: ncu does not know {missing}; retrying without them")
            metrics = [m for m in metrics if m not in missing]
            continue
        break
    info["ncu_rc"] = proc.returncode
    info["metrics"] = metrics
    info["command"] = " ".join(cmd[: cmd.index("--metrics") + 1]) + " <metrics> -f -o " + name + " python3 ..."
    if not rep.exists():
        info["error"] = text.strip().splitlines()[-5:] if text.strip() else ["no report written"]
        return info
    exports = [("csv", ["--print-units", "base"])]
    if name == HUMAN_UNITS_FOR:
        exports.append(("human.csv", []))
    for suffix, extra in exports:
        proc = subprocess.run([ncu, "--import", str(rep), "--csv", "--page", "raw", *extra],
                              capture_output=True, text=True, timeout=60)
        target = out / f"{name}.{suffix}" if suffix == "csv" else out / f"{name}_human.csv"
        target.write_text(proc.stdout)
        if proc.returncode != 0:
            info.setdefault("export_errors", []).append(proc.stderr.strip()[:300])
    rows = max(0, len((out / f"{name}.csv").read_text().strip().splitlines()) - 2)
    info["launches"] = rows
    return info


def drive(args: argparse.Namespace) -> int:
    start = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((HERE / "manifest.json").read_text())
    examples = [e for e in manifest["examples"] if not args.only or e["name"] in args.only]
    ncu = _ncu_path(args.ncu)
    env = dict(os.environ)
    env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    env.setdefault("TORCH_EXTENSIONS_DIR", str(Path(args.build_dir).resolve()))
    env.setdefault("MAX_JOBS", str(max(2, (os.cpu_count() or 4) // max(1, len(examples)))))
    env["PYTHONUNBUFFERED"] = "1"
    log: list[str] = []
    ver = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    meta: dict = {"ncu": ver[-1] if ver else "?", "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "examples": []}
    try:
        import torch

        meta["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no cuda"
        meta["torch"] = torch.__version__
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        meta["gpu"] = f"torch import failed: {exc}"

    _log(f"building {len(examples)} examples in parallel ({env['MAX_JOBS']} jobs each)")

    def build(ex: dict) -> tuple[str, int, float, str]:
        t0 = time.time()
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--build-one",
                               str(HERE / ex["kernel"])], capture_output=True, text=True, env=env,
                              timeout=300)
        return ex["name"], proc.returncode, round(time.time() - t0, 1), (proc.stdout + proc.stderr)[-2000:]

    built: set[str] = set()
    with cf.ThreadPoolExecutor(len(examples)) as pool:
        for name, rc, secs, tail in pool.map(build, examples):
            _log(f"built {name}: rc={rc} in {secs}s")
            meta.setdefault("build_s", {})[name] = secs
            if rc == 0:
                built.add(name)
            else:
                log.append(f"build of {name} failed:\n{tail}")

    metrics = _filter_by_listing(ncu, wanted_metrics(), log)
    _log(f"{len(metrics)} metrics")
    for ex in examples:
        if ex["name"] not in built:
            continue
        if time.time() - start > args.deadline_s:
            log.append(f"deadline reached before {ex['name']}")
            break
        info = _profile(ncu, ex, metrics, out, env, log)
        metrics = info.get("metrics", metrics)  # later runs skip what ncu rejected
        meta["examples"].append({k: v for k, v in info.items() if k != "metrics"})
        _log(f"profiled {ex['name']}: rc={info['ncu_rc']} launches={info.get('launches')} "
             f"in {info.get('profile_s')}s")
    meta["metrics"] = metrics
    meta["log"] = log
    meta["wall_s"] = round(time.time() - start, 1)
    (out / "capture_meta.json").write_text(json.dumps(meta, indent=2))
    for line in log:
        _log(line)
    return 0 if all("error" not in e for e in meta["examples"]) and meta["examples"] else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="profiles_out")
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--ncu", default=None)
    p.add_argument("--build-dir", default="/tmp/ks_torch_ext")
    p.add_argument("--deadline-s", type=float, default=150.0)
    p.add_argument("--build-one", default=None)
    p.add_argument("--run-one", nargs=2, default=None)
    args = p.parse_args()
    if args.build_one:
        build_one(args.build_one)
        return 0
    if args.run_one:
        run_one(*args.run_one)
        return 0
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
