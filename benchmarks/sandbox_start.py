"""What the sandbox costs a worker at start: the time from launch to exit of a do-nothing Python program, run
plainly, in the full sandbox, and in the sandbox without the read-only binds over the shared entries of
/proc (the part that lets CUDA name its threads while keeping sysctls and the driver's files read-only).

    python benchmarks/sandbox_start.py [--trials 25]

Prints one row per variant (median and p90 over the trials). A real worker then spends seconds importing
torch and bringing CUDA up, so these figures are the sandbox's whole share of a worker's start.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelskill.pipeline.harness import isolation, sandbox

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "scripts"))
from _table import table  # noqa: E402
from sandbox_cuda_probe import launcher_without  # noqa: E402


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=cwd, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=25)
    args = ap.parse_args()
    if isolation.available() != isolation.NAMESPACES:
        print(f"no sandbox here ({isolation.available()}): nothing to compare")
        return 0
    env = sandbox.scrub_env()
    inner = [sys.executable, "-I", "-S", "-c", "pass"]
    samples: dict[str, list[float]] = {"plain process": [], "sandbox": [], "sandbox without /proc binds": []}
    root = Path(tempfile.mkdtemp(prefix="ks-sandbox-start-"))
    try:
        for i in range(args.trials):  # interleaved, so a change of load hits every variant alike
            samples["plain process"].append(_timed(inner, env, root))
            work = root / f"w{i}"
            work.mkdir()
            cmd = isolation.wrap(inner, workdir=work, env=env, read_only=[], writable=[])
            samples["sandbox"].append(_timed(cmd, env, work))
            samples["sandbox without /proc binds"].append(_timed(launcher_without(cmd, "open_own_proc"), env, work))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows: list[list[object]] = [[name, statistics.median(v) * 1e3, sorted(v)[int(0.9 * (len(v) - 1))] * 1e3]
                                for name, v in samples.items()]
    print(table(f"worker start, {args.trials} trials each (interleaved)", ["start to exit", "median ms", "p90 ms"],
                rows, digits=1), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
