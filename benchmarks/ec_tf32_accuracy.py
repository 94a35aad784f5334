"""Accuracy of error-compensated TF32 (3xTF32) next to plain fp32 FFMA and plain TF32, on a GPU.

    python benchmarks/ec_tf32_accuracy.py [--m 4096 --n 4096 --k 8192] [--seeds 0,1] [--out FILE]

C = A @ B with A [M, K], B [K, N] fp32 from torch.rand (KernelBench's inputs: positive, so C is large) and
torch.randn (zero mean: C has elements near 0, where the absolute tolerance decides). Every variant is
compared with a float64 reference (cuBLAS DGEMM of the same fp32 inputs) and with the fp32 reference the
harness uses (cuBLAS SGEMM, TF32 off):

* ``fp32 FFMA``: the warp-tiled CUDA-core SGEMM of the ec_tf32_gemm worked example (its before);
* ``cuBLAS fp32``: torch.matmul with TF32 off (the harness's reference itself, against float64 only);
* ``cuBLAS TF32``: torch.matmul with ``allow_tf32`` on (plain TF32, one MMA per product);
* ``EC-TF32``: the ec_tf32_gemm worked example (its after): three TF32 MMAs per product.

It prints one table row per (inputs, variant): max |error|, the largest error relative to max |C|, the
number of elements outside ``atol = rtol = 1e-4`` (the strict protocol) against float64 and against the fp32
reference, and the median time (CUDA events, 10 calls). torch and the standard library only. Writes JSON to
``--out`` (default ``$OUT/ec_tf32_accuracy.json`` when ``$OUT`` is set).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "kb" / "skills" / "examples" / "ec_tf32_gemm"
ATOL = RTOL = 1e-4


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # builds the example's extension (load_inline)
    return module


def _median_ms(fn, reps: int = 10) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _errors(out, ref64, ref32) -> dict:
    import torch

    diff = (out.double() - ref64).abs()
    outside64 = int((diff > ATOL + RTOL * ref64.abs()).sum())
    row = {"max_abs_err": float(diff.max()), "max_err_over_max_abs_c": float(diff.max() / ref64.abs().max()),
           "outside_1e-4_vs_fp64": outside64}
    if ref32 is not None:
        d32 = (out.double() - ref32.double()).abs()
        row["outside_1e-4_vs_fp32_ref"] = int((d32 > ATOL + RTOL * ref32.double().abs()).sum())
        row["passes_strict_vs_fp32_ref"] = bool(torch.allclose(out, ref32, atol=ATOL, rtol=RTOL))
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=8192)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--build-only", action="store_true", help="build the two example extensions and stop")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)

    import torch

    t0 = time.perf_counter()
    ffma = _load(EXAMPLE / "before.py", "ec_tf32_example_before")
    ec = _load(EXAMPLE / "after.py", "ec_tf32_example_after")
    print(f"built the example extensions in {time.perf_counter() - t0:.0f} s", flush=True)
    if args.build_only:
        return 0
    ffma_model, ec_model = ffma.ModelNew().cuda(), ec.ModelNew().cuda()
    m, n, k = args.m, args.n, args.k
    flops = 2.0 * m * n * k
    rows: list[dict] = []
    for dist in ("rand", "randn"):
        for seed in (int(s) for s in args.seeds.split(",") if s):
            torch.manual_seed(seed)
            gen = torch.rand if dist == "rand" else torch.randn
            a = gen(m, k, device="cuda")
            b = gen(k, n, device="cuda")
            torch.backends.cuda.matmul.allow_tf32 = False
            ref64 = torch.matmul(a.double(), b.double())
            ref32 = torch.matmul(a, b)
            variants = {
                "fp32 FFMA": lambda a=a, b=b: ffma_model(a, b),
                "cuBLAS fp32": lambda a=a, b=b: torch.matmul(a, b),
                "cuBLAS TF32": lambda a=a, b=b: torch.matmul(a, b),
                "EC-TF32": lambda a=a, b=b: ec_model(a, b),
            }
            for name, fn in variants.items():
                torch.backends.cuda.matmul.allow_tf32 = name == "cuBLAS TF32"
                out = fn()
                torch.cuda.synchronize()
                row = {"inputs": dist, "seed": seed, "variant": name, "m": m, "n": n, "k": k}
                row |= _errors(out, ref64, None if name == "cuBLAS fp32" else ref32)
                ms = _median_ms(fn)
                row |= {"median_ms": round(ms, 4), "tflops": round(flops / ms / 1e9, 1)}
                torch.backends.cuda.matmul.allow_tf32 = False
                rows.append(row)
                del out
            del a, b, ref64, ref32
            torch.cuda.empty_cache()

    head = (f"{'inputs':6s} {'seed':>4s} {'variant':12s} {'max|err|':>10s} {'err/max|C|':>11s} "
            f"{'out64':>8s} {'out32':>8s} {'strict':>6s} {'ms':>8s} {'TFLOP/s':>8s}")
    print(f"C = A @ B, M = {m}, N = {n}, K = {k}; out64 / out32: elements outside atol = rtol = 1e-4 against "
          f"float64 / the fp32 reference; strict: torch.allclose against the fp32 reference")
    print(head)
    print("-" * len(head))
    for r in rows:
        out32 = r.get("outside_1e-4_vs_fp32_ref")
        strict = r.get("passes_strict_vs_fp32_ref")
        print(f"{r['inputs']:6s} {r['seed']:>4d} {r['variant']:12s} {r['max_abs_err']:10.3g} "
              f"{r['max_err_over_max_abs_c']:11.3g} {r['outside_1e-4_vs_fp64']:>8d} "
              f"{'-' if out32 is None else out32:>8} {'-' if strict is None else ('yes' if strict else 'NO'):>6s} "
              f"{r['median_ms']:8.3f} {r['tflops']:8.1f}")
    report = {"hardware": torch.cuda.get_device_name(), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d", time.gmtime()),
              "command": "python benchmarks/ec_tf32_accuracy.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "atol": ATOL, "rtol": RTOL, "rows": rows}
    out_path = Path(args.out) if args.out else Path(os.environ.get("OUT") or ".") / "ec_tf32_accuracy.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=1))
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
