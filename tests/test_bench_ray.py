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
    rows = json.loads(report.output)["tasks"]
    assert [r["failure"] for r in rows] == [None, "mismatch"] and rows[0]["gpu"] == "cpu"
