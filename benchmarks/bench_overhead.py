"""The suite scheduler's own cost, on the CPU, with scripted boundaries (an in-process LLM provider that answers
at once, a scripted GPU): what ``kernelskill bench`` adds per step on top of the loop itself, and how busy the
pool keeps a (simulated) GPU while the runs' LLM steps overlap.

    python benchmarks/bench_overhead.py [--runs 8] [--rounds 3] [--gpu-ms 50] [--llm-ms 20] [--json OUT]
    python benchmarks/bench_overhead.py --gpu-phase 8          # (GPU) the real harness behind the pool

Rows:
- pool only: no-op jobs through the GPU pool (submit, queue, worker, future): its cost per job;
- loop alone: the runs one after another with the plain loop (no suite): cost per recorded step;
- suite driver: the same runs through ``bench``'s driver (threads, LLM gate, GPU pool): cost per step;
- simulated latencies: each LLM answer takes ``--llm-ms``, each GPU job ``--gpu-ms`` on one GPU slot:
  wall time against the GPU time the jobs needed, and the GPU busy share the pool achieved.
A step's cost is mostly the fsync of its event (every step is on disk before the next one starts); the driver
overlaps those of different runs. None of these rows is a GPU measurement. ``--gpu-phase N`` is: the GPU phase of an N-run suite, one fresh
candidate per run (cold builds: half load_inline extensions, half fast-path kernels, with their tasks from
tests/harness_cases), through the same pool with the real harness (a worker per visible GPU, builds ahead on
the CPU): wall time, GPU busy share, evaluations per minute.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/ (the scripted answers and tasks)

from kernelskill.config import LLMSettings  # noqa: E402
from kernelskill.pipeline.bench.driver import DriveOptions, drive  # noqa: E402
from kernelskill.pipeline.bench.llm_gate import GatedLLMClient  # noqa: E402
from kernelskill.pipeline.bench.suite import Suite  # noqa: E402
from kernelskill.pipeline.bench.tasks import kernelbench_tasks  # noqa: E402
from kernelskill.pipeline.loop import Loop, LoopOptions  # noqa: E402
from kernelskill.pipeline.loop.llm import PROVIDERS, LLMClient, LLMResponse, Usage  # noqa: E402
from kernelskill.pipeline.runs.gpu_pool import GPUJob, GPUPool, LoopEvaluatorBackend  # noqa: E402
from tests.test_bench_helpers import CountingEvaluator, StandInRetriever, responder, write_level  # noqa: E402

LLM_DELAY = {"s": 0.0}


def scripted_provider(client: Any, role: str, messages: list[dict[str, str]], step: str) -> LLMResponse:
    if LLM_DELAY["s"]:
        time.sleep(LLM_DELAY["s"])
    text = str(responder(step, role, {"messages": messages}))
    return LLMResponse(text=text, usage=Usage(prompt_tokens=100, completion_tokens=50, total_tokens=150),
                       provider="bench-scripted")


PROVIDERS["bench-scripted"] = scripted_provider


class SleepyGPU(CountingEvaluator):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        time.sleep(self.seconds)
        return super().evaluate(task, candidate, seed=seed)

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        time.sleep(self.seconds)
        return super().profile(task, candidate)


def settings() -> LLMSettings:
    return LLMSettings(provider="bench-scripted", model="bench")


def steps_in(suite_dir: Path) -> int:
    return sum(1 for f in suite_dir.glob("runs/*/events.jsonl") for line in f.read_text().splitlines()
               if '"kind": "llm"' in line or '"kind": "gpu"' in line)


def make_suite(work: Path, name: str, runs: int, rounds: int) -> tuple[Suite, LoopOptions]:
    kb = work / f"{name}-kb"
    write_level(kb, 1, [f"T{i}" for i in range(runs)])
    tasks = kernelbench_tasks(kb, [1])
    suite = Suite.create_or_resume(work / name, "optimize", tasks, {"rounds": rounds})
    return suite, LoopOptions(rounds=rounds)


def manifest(options: LoopOptions) -> Any:
    return lambda entry: {"model": "bench", "options": options.model_dump(exclude={"stop_before"}), "harness": {}}


def pool_only(jobs: int) -> dict[str, Any]:
    class Nothing:
        def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
            return {}

    t0 = time.perf_counter()
    with GPUPool(LoopEvaluatorBackend(Nothing()), build_jobs=1) as pool:
        futures = [pool.submit(GPUJob("eval", Path("t.py"), Path("c.py"), Path("."))) for _ in range(jobs)]
        for f in futures:
            f.result()
    wall = time.perf_counter() - t0
    return {"row": "pool only", "runs": "-", "steps": jobs, "wall_s": wall, "us_per_step": wall / jobs * 1e6}


def loop_alone(work: Path, runs: int, rounds: int, name: str = "alone") -> dict[str, Any]:
    suite, options = make_suite(work, name, runs, rounds)
    t0 = time.perf_counter()
    for entry in suite.tasks:
        run = suite.run_for(entry, manifest(options)(entry))
        Loop(run, LLMClient(settings()), CountingEvaluator(), StandInRetriever(), options).execute()
    wall = time.perf_counter() - t0
    steps = steps_in(suite.path)
    return {"row": "loop alone (one run after another)", "runs": runs, "steps": steps, "wall_s": wall,
            "us_per_step": wall / steps * 1e6}


def driver(work: Path, runs: int, rounds: int, *, gpu_s: float = 0.0, llm_s: float = 0.0,
           name: str = "driver") -> dict[str, Any]:
    suite, options = make_suite(work, name, runs, rounds)
    LLM_DELAY["s"] = llm_s
    t0 = time.perf_counter()
    outcome = drive(suite, options=options, make_llm=lambda gate: GatedLLMClient(settings(), gate),
                    backend=LoopEvaluatorBackend(SleepyGPU(gpu_s)), retriever=StandInRetriever(),
                    run_manifest=manifest(options), drive_options=DriveOptions(llm_concurrency=8, max_active=runs))
    wall = time.perf_counter() - t0
    LLM_DELAY["s"] = 0.0
    steps = steps_in(suite.path)
    assert all(r.state == "finished" for r in outcome.runs), [r.state for r in outcome.runs]
    row = {"row": "suite driver" if not (gpu_s or llm_s) else
           f"suite driver, LLM {llm_s * 1e3:.0f} ms, GPU {gpu_s * 1e3:.0f} ms (1 slot)",
           "runs": runs, "steps": steps, "wall_s": wall, "us_per_step": wall / steps * 1e6}
    if gpu_s:
        row["gpu_jobs"] = outcome.gpu_jobs
        row["gpu_needed_s"] = outcome.gpu_jobs * gpu_s
        row["gpu_busy_share"] = outcome.gpu_busy_share
    return row


CASES = ROOT / "tests" / "harness_cases"
PAIRS = (("good_add_inline.py", "add.py"), ("good_softmax_fastpath.py", "softmax_wide.py"))


def gpu_phase(work: Path, n: int) -> dict[str, Any]:
    import uuid

    from kernelskill.pipeline.harness import EvalConfig

    jobs = []
    for i in range(n):
        cand_name, task_name = PAIRS[i % len(PAIRS)]
        nonce = uuid.uuid4().hex[:10]
        source = (CASES / "gpu" / cand_name).read_text().replace("ks_case_add", f"ks_phase_{nonce}")
        source = source.replace('cuda_src = r"""', f'cuda_src = r"""\n// {nonce}').replace('SRC = r"""', f'SRC = r"""\n// {nonce}')
        run_dir = work / f"run{i}"
        (run_dir / "candidates").mkdir(parents=True)
        (run_dir / "candidates" / cand_name).write_text(source)
        jobs.append(GPUJob("eval", CASES / "tasks" / task_name, run_dir / "candidates" / cand_name, run_dir))
    cfg = EvalConfig(cache_dir=str(work / "cache"), baseline="compile")
    from kernelskill.pipeline.runs.gpu_pool import HarnessBackend

    backend = HarnessBackend(lambda run_dir, seed: EvalConfig(**cfg.to_dict()))
    t0 = time.perf_counter()
    with GPUPool(backend) as pool:
        futures = [pool.submit(job) for job in jobs]
        results = [f.result() for f in futures]
        stats = pool.stats
    wall = time.perf_counter() - t0
    return {"row": f"GPU phase, real harness ({backend.name}, {len(backend.slots())} GPU)", "runs": n, "steps": n,
            "wall_s": wall, "us_per_step": wall / n * 1e6, "gpu_busy_share": stats.busy_share(),
            "statuses": [r.get("status") for r in results], "evals_per_min": n / wall * 60}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gpu-ms", type=float, default=50.0)
    parser.add_argument("--llm-ms", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--gpu-phase", type=int, default=0, metavar="N",
                        help="(GPU) time the GPU phase of an N-run suite with the real harness instead")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ks-bench-overhead-"))
    if args.gpu_phase:
        try:
            rows = [gpu_phase(work, args.gpu_phase)]
        finally:
            shutil.rmtree(work, ignore_errors=True)
        r = rows[0]
        print(f"{r['row']}: {r['runs']} candidates in {r['wall_s']:.1f} s ({r['evals_per_min']:.1f} per minute), "
              f"GPU busy share {r['gpu_busy_share']:.0%}; statuses {dict(Counter(r['statuses']))}")
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2) + "\n")
        return
    try:
        loop_alone(work, 1, 1, name="warm-up")  # templates, imports: paid once, by nobody below
        rows = [pool_only(2000), loop_alone(work, args.runs, args.rounds), driver(work, args.runs, args.rounds),
                driver(work, args.runs, args.rounds, gpu_s=args.gpu_ms / 1e3, llm_s=args.llm_ms / 1e3,
                       name="latency")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'measurement':<46} {'runs':>5} {'steps':>6} {'wall s':>8} {'us/step':>9} {'GPU busy':>9}")
    for r in rows:
        share = r.get("gpu_busy_share")
        print(f"{r['row']:<46} {r['runs']!s:>5} {r['steps']:>6} {r['wall_s']:>8.3f} {r['us_per_step']:>9.0f} "
              f"{'-' if share is None else f'{share:.0%}':>9}")
    last = rows[-1]
    if "gpu_needed_s" in last:
        print(f"\nsimulated suite: {last['gpu_jobs']} GPU jobs needed {last['gpu_needed_s']:.2f} s of GPU time; "
              f"the suite took {last['wall_s']:.2f} s (a run waits for its LLM steps between its GPU jobs; the pool "
              "serves the other runs meanwhile)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
