"""The Ray backend against the local evaluator: the same harness, the same verdicts. A local Ray instance in
CPU mode (no GPU here), the real harness in its CPU mode on pure-PyTorch candidates. Skipped without the
optional extra (``pip install -e ".[ray]"``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

ray = pytest.importorskip("ray")

from kernelskill.cli import main  # noqa: E402
from kernelskill.pipeline.harness import EvalConfig, EvalJob, LocalEvaluator  # noqa: E402
from tests.test_loop_helpers import ADD_CANDIDATE, ADD_TASK  # noqa: E402

WRONG = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a - b\n"
BROKEN = "import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray() -> Any:
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def config(tmp_path: Path) -> EvalConfig:
    return EvalConfig(correctness_trials=1, timing_trials=5, warmup=1, determinism_reruns=1,
                      cache_dir=str(tmp_path / "cache"))


def test_ray_evaluator_gives_the_local_evaluators_verdicts(tmp_path: Path, local_ray: Any) -> None:
    from kernelskill.pipeline.bench.ray_backend import RayEvaluator

    task = tmp_path / "add.py"
    task.write_text(ADD_TASK)
    jobs = []
    for name, source in (("right", ADD_CANDIDATE), ("wrong", WRONG), ("broken", BROKEN)):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        jobs.append(EvalJob(task=str(task), candidate=str(path), config=config(tmp_path), tag=name))
    on_ray = RayEvaluator(gpus_per_job=0.0)
    assert on_ray.gpus == 0 and on_ray.slots == 2
    remote = on_ray.submit(jobs)
    local = LocalEvaluator(gpus=[]).submit(jobs)

    def verdict(results: list[Any]) -> list[tuple[str, bool, str, str]]:
        return [(r.status, r.correct, r.candidate, r.details.get("tag")) for r in results]

    assert verdict(remote) == verdict(local)
    assert [r.status for r in remote] == ["ok", "mismatch", "compile_error"]
    assert remote[0].speedup is not None and remote[0].details["gpu_name"] == "cpu"


def test_bench_eval_with_the_ray_evaluator(tmp_path: Path, local_ray: Any) -> None:
    level = tmp_path / "kb" / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "1_Add.py").write_text(ADD_TASK)
    sols = tmp_path / "sols"
    sols.mkdir()
    (sols / "level_1_problem_1_sample_0_kernel.py").write_text(ADD_CANDIDATE)
    (sols / "level_1_problem_1_sample_1_kernel.py").write_text(WRONG)
    home = tmp_path / "home"
    home.mkdir()
    (home / "kernelskill.toml").write_text("[harness]\ncorrectness_trials = 1\ntiming_trials = 5\n")
    out = CliRunner().invoke(main, ["bench", "eval", str(sols), "--kernelbench", str(tmp_path / "kb"), "--level",
                                    "1", "--suite", str(tmp_path / "suite"), "--home", str(home), "--evaluator",
                                    "ray", "--baseline", "eager", "--no-progress", "--json"])
    assert out.exit_code == 0, out.output
    text = out.output
    data = json.loads(text[text.find("{"):text.rfind("}") + 1])
    assert [r["state"] for r in data["runs"]] == ["finished", "finished"]
    assert data["runs"][0]["best_speedup"] is not None and data["runs"][1]["best_speedup"] is None
    report = CliRunner().invoke(main, ["bench", "report", str(tmp_path / "suite"), "--json"])
    data = json.loads(report.output)
    rows = data["tasks"]
    assert [r["failure"] for r in rows] == [None, "mismatch"] and rows[0]["gpu"] == "cpu"
    # each stored evaluation says who ran it, where, in how many tries; the report counts them per device
    stored = [json.loads(line) for f in sorted((tmp_path / "suite" / "runs").glob("*/events.jsonl"))
              for line in f.read_text().splitlines()]
    details = [e["data"]["result"]["details"] for e in stored if e["type"] == "eval"]
    assert len(details) == 2 and {d["evaluator"] for d in details} == {"ray"}
    assert all(d["device"].startswith("ray node ") and d["attempts"] == 1 for d in details)
    assert sum(d["evals"] for d in data["devices"]) == 2 and {d["evaluator"] for d in data["devices"]} == {"ray"}
    [session] = data["sessions"]
    assert session["evaluator"] == "ray" and session["cluster_gpus"] == 0 and session["gpu_jobs"] == 2
    assert session["ray_address"] == "local instance" and session["retries"] == 0
    markdown = CliRunner().invoke(main, ["bench", "report", str(tmp_path / "suite")]).output
    assert "GPU results per device: ray on ray node " in markdown


def test_a_job_whose_ray_worker_dies_is_run_again_and_says_so(tmp_path: Path, local_ray: Any) -> None:
    """The remote task kills its own Ray worker process on its first try (a marker file: once): Ray raises
    WorkerCrashedError, the pool runs the job again, and the result counts both tries."""
    from kernelskill.pipeline.bench.ray_backend import RayBackend, RayEvaluator, _remote_job
    from kernelskill.pipeline.runs.gpu_pool import GPUJob, GPUPool

    marker = str(tmp_path / "died-once")

    def dies_once(*args: Any) -> dict[str, Any]:
        import os as _os
        from pathlib import Path as _Path

        if not _Path(marker).exists():
            _Path(marker).touch()
            _os._exit(1)  # the worker process vanishes under the task
        return _remote_job(*args)

    task, cand = tmp_path / "add.py", tmp_path / "right.py"
    task.write_text(ADD_TASK)
    cand.write_text(ADD_CANDIDATE)
    evaluator = RayEvaluator(gpus_per_job=0.0)
    evaluator._fn = ray.remote(dies_once)  # the stand-in at the worker-death boundary only
    backend = RayBackend(lambda run_dir, seed: config(tmp_path), evaluator)
    with GPUPool(backend, retries=2) as pool:
        result = pool.submit(GPUJob(kind="eval", task=task, candidate=cand, run_dir=tmp_path, tag="t:r0")).result()
        stats = pool.stats
    assert Path(marker).exists() and stats.retries == 1
    assert result["status"] == "ok" and result["correct"]
    details = result["details"]
    assert details["attempts"] == 2 and details["evaluator"] == "ray"
    assert details["device"].startswith("ray node ") and details["ray_node"] and details["gpu_name"] == "cpu"


@pytest.mark.parametrize("command", ["run", "eval"])
def test_an_unreachable_ray_address_is_one_line_and_exit_2(tmp_path: Path, command: str) -> None:
    task = tmp_path / "add.py"
    task.write_text(ADD_TASK)
    home = tmp_path / "home"
    home.mkdir()
    if command == "run":
        args = ["bench", "run", str(task), "--home", str(home), "--suite", str(tmp_path / "suite")]
    else:
        level = tmp_path / "kb" / "KernelBench" / "level1"
        level.mkdir(parents=True)
        (level / "1_Add.py").write_text(ADD_TASK)
        (tmp_path / "sols").mkdir()
        (tmp_path / "sols" / "level_1_problem_1_sample_0_kernel.py").write_text(ADD_CANDIDATE)
        args = ["bench", "eval", str(tmp_path / "sols"), "--kernelbench", str(tmp_path / "kb"), "--level", "1",
                "--home", str(home), "--suite", str(tmp_path / "suite")]
    out = CliRunner().invoke(main, [*args, "--ray-address", "127.0.0.1:1", "--no-progress"])
    assert out.exit_code == 2, out.output
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith("error: --ray-address: no Ray cluster answers at 127.0.0.1:1")
    assert "Traceback" not in out.output and not (tmp_path / "suite").exists()
    clash = CliRunner().invoke(main, [*args, "--ray-address", "127.0.0.1:1", "--evaluator", "local"])
    assert clash.exit_code == 2 and "--ray-address is for --evaluator ray" in clash.output
