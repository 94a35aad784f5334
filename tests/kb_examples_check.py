"""Build and check worked examples of the KB on a CUDA GPU (torch + stdlib only).

Used by ``tests/test_kb_examples_b1.py`` (the ``gpu`` test) and runnable on a bare GPU box::

    python3 tests/kb_examples_check.py [--workers 12] [--json OUT.json] [method_id ...]

Each (example, variant) pair is built with ``load_inline`` and checked against the task's ``Model``
in its own worker process (a sticky CUDA error ends only that worker). Timings printed here are
rough (other workers build and run at the same time); ``benchmarks/kb_evidence.py`` measures evidence.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
import types
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "kb" / "skills" / "examples"

#: The methods whose examples this file checks by default (the first half of the method ids).
B1_METHODS: tuple[str, ...] = (
    "coalesced_access", "vectorized_access_16b", "more_work_per_thread", "memory_level_parallelism",
    "grid_stride_loop", "launch_config_tuning", "occupancy_launch_bounds", "register_blocking",
    "shared_memory_tiling", "bank_conflict_avoidance", "cp_async_double_buffering", "tma_bulk_copy",
    "tensor_core_mma", "wgmma_hopper", "cublas_gemm", "epilogue_fusion", "kernel_fusion",
    "kernel_fission", "warp_shuffle_reduction", "block_reduction", "atomic_privatization",
    "welford_one_pass_norm",
)


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _median_ms(fn, inputs, reps: int = 5) -> float:
    import torch

    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def check_variant(method: str, variant: str, trials: int = 2) -> dict:
    """Build ``examples/<method>/<variant>.py`` and compare it with the task's Model on CUDA."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    row: dict = {"method": method, "variant": variant, "status": "ok", "message": ""}
    folder = EXAMPLES / method
    try:
        task = _load_module(folder / "task.py", f"ks_task_{method}")
        cand = _load_module(folder / f"{variant}.py", f"ks_{variant}_{method}")
        t0 = time.perf_counter()
        ext = getattr(cand, "_ext", None)
        if callable(ext) and not isinstance(ext, types.ModuleType):  # lazy builders; some hold the module
            ext()
        row["build_s"] = round(time.perf_counter() - t0, 1)
        init = task.get_init_inputs()
        torch.manual_seed(42)
        ref = task.Model(*init).cuda().eval()
        torch.manual_seed(42)
        new = cand.ModelNew(*init).cuda().eval()
        worst_abs, ok4, ok2 = 0.0, True, True
        with torch.no_grad():
            for trial in range(trials):
                torch.manual_seed(1000 + trial)
                inputs = [x.cuda() if hasattr(x, "cuda") else x for x in task.get_inputs()]
                expected = ref(*inputs)
                got_all = new(*inputs)
                torch.cuda.synchronize()
                pairs = (list(zip(got_all, expected, strict=True)) if isinstance(expected, tuple | list)
                         else [(got_all, expected)])
                for got, want in pairs:  # every output, tuples too
                    if got.shape != want.shape or got.dtype != want.dtype:
                        raise AssertionError(f"shape/dtype {tuple(got.shape)} {got.dtype} != "
                                             f"{tuple(want.shape)} {want.dtype}")
                    diff = (got.float() - want.float()).abs()
                    worst_abs = max(worst_abs, float(diff.max()))
                    ok4 = ok4 and bool(torch.allclose(got.float(), want.float(), atol=1e-4, rtol=1e-4))
                    ok2 = ok2 and bool(torch.allclose(got.float(), want.float(), atol=1e-2, rtol=1e-2))
            row.update(max_abs_err=worst_abs, ok_1e4=ok4, ok_1e2=ok2)
            if not ok2:
                row["status"] = "mismatch"
            row["ms"] = round(_median_ms(new, inputs), 4)
            row["ref_ms"] = round(_median_ms(ref, inputs), 4)
    except Exception as exc:  # reported in the table, the worker survives
        row["status"] = "error"
        row["message"] = f"{type(exc).__name__}: {exc}"[-1500:]
        row["trace"] = traceback.format_exc()[-3000:]
    return row


def run_all(methods: list[str], workers: int = 12) -> list[dict]:
    jobs = [(m, v) for m in methods for v in ("before", "after")]
    rows: list[dict] = []
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(check_variant, m, v): (m, v) for m, v in jobs}
        for fut in cf.as_completed(futures):
            m, v = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:  # the worker died (sticky CUDA error, OOM kill)
                row = {"method": m, "variant": v, "status": "crashed", "message": repr(exc)}
            rows.append(row)
            print(_fmt(row), flush=True)
    rows.sort(key=lambda r: (r["method"], r["variant"]))
    return rows


def _fmt(row: dict) -> str:
    return (f"{row['method']:<28} {row['variant']:<7} {row['status']:<9} "
            f"build={row.get('build_s', '-')!s:>6}s err={row.get('max_abs_err', float('nan')):.2e} "
            f"1e-4={row.get('ok_1e4', '-')!s:<5} ms={row.get('ms', '-')!s:>8} ref_ms={row.get('ref_ms', '-')!s:>8} "
            f"{row.get('message', '')[:300]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("methods", nargs="*", default=list(B1_METHODS))
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    os.environ.setdefault("MAX_JOBS", "2")
    rows = run_all(args.methods, args.workers)
    print("\n== summary ==")
    for row in rows:
        print(_fmt(row))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if r["status"] != "ok"]
    for r in bad:
        print(f"--- {r['method']}/{r['variant']}: {r.get('trace', r.get('message', ''))}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
