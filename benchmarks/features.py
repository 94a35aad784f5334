"""Feature extraction speed and accuracy on the labelled corpus (rules only, no LLM).

    /work/venv/bin/python -m kernelskill.benchmarks.features   (or: python benchmarks/features.py)

Prints one row per kernel (median extraction time of N runs, features right) and one row per
feature (accuracy), then the totals against the goals (median <= 5 ms, >= 90 % overall, >= 75 % each).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import yaml
from _stages import stage
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]


def main(runs: int = 5, corpus: Path | None = None) -> int:
    from kernelskill.feature_rules import extract
    from kernelskill.feature_rules.kernel_facts import clear_caches
    from kernelskill.kb.schema import FEATURE_NAMES

    corpus = corpus or ROOT / "tests" / "corpus"
    labels = yaml.safe_load((corpus / "labels.yaml").read_text())
    per_kernel = Table(title=f"feature extraction per kernel (median of {runs}, rules only)")
    for col in ("kernel", "wall ms", "cpu ms", "right", "wrong"):
        per_kernel.add_column(col)
    times: list[float] = []
    cpu_times: list[float] = []
    right = {f: 0 for f in FEATURE_NAMES}
    extract("__global__ void warm(float* x) { x[0] = 1.0f; }", path="warm.cu")
    stage(f"extracting the features of {len(labels)} corpus kernels, {runs} times each")
    for i, name in enumerate(sorted(labels), 1):
        if i % 10 == 0 or i == len(labels):
            stage(f"{i}/{len(labels)} kernels")
        text = (corpus / name).read_text()
        samples, cpu = [], []
        for _ in range(runs):
            clear_caches()  # time cold extractions: no memoised text from the previous run
            t0, c0 = time.perf_counter(), time.process_time()
            fs = extract(text, path=name)
            samples.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        ms = statistics.median(samples)
        times.append(ms)
        cpu_times.append(statistics.median(cpu))
        wrong = [f for f in FEATURE_NAMES if fs.values[f] != labels[name][f]]
        for f in FEATURE_NAMES:
            right[f] += f not in wrong
        per_kernel.add_row(name, f"{ms:.2f}", f"{cpu_times[-1]:.2f}", f"{18 - len(wrong)}/18", ", ".join(wrong) or "-")
    per_feature = Table(title="accuracy per feature")
    per_feature.add_column("feature")
    per_feature.add_column("accuracy")
    n = len(labels)
    for f in FEATURE_NAMES:
        per_feature.add_row(f, f"{100 * right[f] / n:.1f} %")
    out = Console()
    out.print(per_kernel)
    out.print(per_feature)
    overall = 100 * sum(right.values()) / (n * len(FEATURE_NAMES))
    worst = min(100 * v / n for v in right.values())
    out.print(f"kernels {n}; median wall {statistics.median(times):.2f} ms (goal <= 5), max {max(times):.2f} ms; "
              f"median cpu {statistics.median(cpu_times):.2f} ms; load average {os.getloadavg()[0]:.1f}; "
              f"overall accuracy {overall:.1f} % (goal >= 90), worst feature {worst:.1f} % (goal >= 75)")
    return 0


if __name__ == "__main__":
    sys.exit(main(corpus=Path(sys.argv[1]) if len(sys.argv) > 1 else None))
