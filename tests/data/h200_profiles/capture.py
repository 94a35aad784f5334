"""Capture the Nsight Compute profiles of the plain first kernels in this folder (CUDA machine; torch and
the standard library only).

Each ``<name>_kernel.py`` implements the KernelBench task ``<tasks>/<name>_task.py`` (the tasks are not
kept in the repository). For each one a child process builds ``ModelNew`` and the task's ``Model`` with
the same weights, checks one forward against the reference (max abs error into ``capture_meta.json``), and
runs one more forward between ``cudaProfilerStart/Stop``; ncu profiles that forward with the metric set of
``retrieval/field_map.yaml`` (``--clock-control none``) and the report is exported as a raw-page CSV in
base units, ``<name>.csv``.

    python3 tests/data/h200_profiles/capture.py --tasks .device/kb_tasks --out /tmp/out --deadline-s 220
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
NAMES = ("l2_30", "l2_12", "l2_99", "l3_1", "l3_43")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def run_one(kernel: str, task: str, result: str) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    task_mod = _load(Path(task), "task")
    cand = _load(Path(kernel), "candidate")
    torch.manual_seed(0)
    with torch.device("cuda"):
        ref = task_mod.Model(*task_mod.get_init_inputs()).eval()
        new = cand.ModelNew(*task_mod.get_init_inputs()).eval()
    ref_params = [p for p in ref.parameters()]
    new_params = [p for p in new.parameters()]
    with torch.no_grad():
        for a, b in zip(ref_params, new_params, strict=True):
            b.copy_(a)
    torch.manual_seed(1)
    inputs = [x.cuda() if hasattr(x, "cuda") else x for x in task_mod.get_inputs()]
    with torch.no_grad():
        expected = ref(*inputs)
        got = new(*inputs)
        torch.cuda.synchronize()
        err = (got - expected).abs().max().item()
        del expected, got
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        new(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    Path(result).write_text(json.dumps({"max_abs_err": err, "gpu": torch.cuda.get_device_name(0),
                                        "torch": torch.__version__}))


def drive(args: argparse.Namespace) -> int:
    start = time.time()
    capture = _load(ROOT / "examples" / "capture_profiles.py", "capture_profiles")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ncu = capture._ncu_path(None)
    log: list[str] = []
    metrics = capture._filter_by_listing(ncu, capture.wanted_metrics(), log)
    ver = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    meta: dict = {"ncu": ver[-1] if ver else "?", "metrics": metrics, "tasks": {},
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for name in args.only or NAMES:
        left = args.deadline_s - (time.time() - start)
        if left < 20:
            log.append(f"deadline reached before {name}")
            break
        rep = out / name
        res = out / f"{name}.result.json"
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
               "--metrics", ",".join(metrics), "-f", "-o", str(rep), sys.executable, str(Path(__file__).resolve()),
               "--run-one", str(HERE / f"{name}_kernel.py"), str(Path(args.tasks) / f"{name}_task.py"), str(res)]
        t0 = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=min(left, 120))
            text, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            text, rc = f"timeout after {exc.timeout:.0f}s", -1
        info: dict = {"profile_s": round(time.time() - t0, 1), "ncu_rc": rc}
        (out / f"{name}.ncu.log").write_text(text)
        if res.exists():
            info.update(json.loads(res.read_text()))
        report = rep.with_suffix(".ncu-rep")
        if report.exists():
            exp = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                                 capture_output=True, text=True, timeout=60)
            (out / f"{name}.csv").write_text(exp.stdout)
            info["launches"] = max(0, len(exp.stdout.strip().splitlines()) - 2)
            report.unlink()
        else:
            info["error"] = text.strip().splitlines()[-6:]
        meta["tasks"][name] = info
        print(f"[capture] {name}: {info}", flush=True)
    meta["log"] = log
    meta["wall_s"] = round(time.time() - start, 1)
    (out / "capture_meta.json").write_text(json.dumps(meta, indent=2))
    return 0 if meta["tasks"] and all("error" not in t for t in meta["tasks"].values()) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=str(ROOT / ".device" / "kb_tasks"))
    p.add_argument("--out", default="h200_profiles_out")
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--deadline-s", type=float, default=220.0)
    p.add_argument("--run-one", nargs=3, default=None)
    args = p.parse_args()
    if args.run_one:
        run_one(*args.run_one)
        return 0
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
