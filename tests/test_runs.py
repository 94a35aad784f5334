"""The run store: the event log survives a torn write, DuckDB reads it, the CLI lists, shows and reports;
``kernelskill optimize`` rejects bad input with one line before any work starts."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.pipeline.runs import EVENTS, EventLog, Run, RunStore, sql
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import TASK

HELPERS = Path(__file__).with_name("test_loop_helpers.py")


def test_event_log_ignores_and_trims_a_torn_last_line(tmp_path: Path) -> None:
    log = EventLog(tmp_path / EVENTS)
    log.append("gpu", "eval", {"x": 1}, step="r00.eval", round_=0)
    with (tmp_path / EVENTS).open("a") as fh:
        fh.write('{"seq": 2, "kind": "llm", "ty')  # a kill in the middle of a write
    again = EventLog(tmp_path / EVENTS)
    assert [e["seq"] for e in again.events] == [1]
    assert again.find("r00.eval", "eval")["data"] == {"x": 1}
    again.append("llm", "llm_call", {"text": "t"}, step="r01.plan.1", round_=1)
    lines = (tmp_path / EVENTS).read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2]


def test_paths_and_host_are_scrubbed_from_the_log(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create(_task(tmp_path), {"model": "m"})
    run.log.append("gpu", "eval", {"message": f"error in {run.path.resolve()}/candidates/a.py "
                                   f"on {socket.gethostname()}"}, step="s")
    text = (run.path / EVENTS).read_text()
    assert str(tmp_path) not in text and "./candidates/a.py" in text
    assert json.loads((run.path / "run.json").read_text())["task"] == "task.py"


def _task(tmp_path: Path) -> Path:
    path = tmp_path / "relu2.py"
    path.write_text(TASK)
    return path


def _finished_run(tmp_path: Path) -> Run:
    run = RunStore(tmp_path / "home" / "runs").create(_task(tmp_path), {"model": "m"})
    run.log.append("llm", "llm_call", {"role": "generator", "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                                                      "total_tokens": 15}, "cost_usd": 0.5},
                   step="r00.generate.1", round_=0)
    run.log.append("gpu", "eval", {"candidate": "candidates/r00.generate.py",
                                   "result": {"status": "ok", "correct": True, "speedup": 1.7}},
                   step="r00.eval", round_=0)
    run.log.append("loop", "attempt", {"round": 0, "branch": "generate", "method": None, "parent": None,
                                       "result_class": "ok", "speedup": 1.7, "accepted": True, "review": "first"},
                   step="r00", round_=0)
    run.log.append("loop", "run_finished", {"best": {"candidate": "candidates/r00.generate.py", "round": 0,
                                                     "method": None, "speedup": 1.7, "verified_speedup": 1.69,
                                                     "candidate_ms": 1.0, "baseline_ms": 1.7}},
                   step="finish.00", round_=0)
    return run


def test_duckdb_views_over_the_log(tmp_path: Path) -> None:
    run = _finished_run(tmp_path)
    assert sql(run, "select role, prompt_tokens, cost_usd from llm_calls") == (
        ["role", "prompt_tokens", "cost_usd"], [("generator", 10, 0.5)])
    assert sql(run, "select step, status, speedup from evals")[1] == [("r00.eval", "ok", 1.7)]
    assert sql(run, "select kind, count(*) from events group by kind order by kind")[1] == [
        ("gpu", 1), ("llm", 1), ("loop", 2)]


def test_runs_cli_list_show_report_sql(tmp_path: Path) -> None:
    run = _finished_run(tmp_path)
    home = tmp_path / "home"
    runner = CliRunner()
    listed = runner.invoke(main, ["runs", "list", "--home", str(home), "--json"])
    assert listed.exit_code == 0, listed.output
    row = json.loads(listed.output)[0]
    assert (row["id"], row["status"], row["best_speedup"], row["verified_speedup"], row["tokens"]) == (
        run.id, "finished", 1.7, 1.69, 15)
    shown = runner.invoke(main, ["runs", "show", run.id, "--home", str(home)])
    assert shown.exit_code == 0 and "generate" in shown.output
    report = runner.invoke(main, ["runs", "report", run.id, "--home", str(home)])
    assert "| 0 | generate | - | - | ok | 1.700 | accepted |" in report.output
    q = runner.invoke(main, ["runs", "sql", run.id, "select count(*) as n from events", "--home", str(home), "--json"])
    assert json.loads(q.output) == [{"n": 4}]
    bad = runner.invoke(main, ["runs", "sql", run.id, "select nope from events", "--home", str(home)])
    assert bad.exit_code == 2 and bad.output.startswith("error: sql:") and bad.output.count("\n") == 1
    missing = runner.invoke(main, ["runs", "show", "no-such-run", "--home", str(home)])
    assert missing.exit_code == 2 and "run no-such-run: not found" in missing.output


@pytest.fixture
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _optimize(tmp_path: Path, task: Path, url: str, *extra: str, key: bool = True, plugins: bool = True):
    env = {"OPENAI_API_KEY": "sk-test" if key else "", "KERNELSKILL_LLM_API_KEY": ""}
    args = ["optimize", str(task), "--home", str(tmp_path / "home"), "--base-url", url, *extra]
    if plugins:
        args += ["--evaluator", f"{HELPERS}:ScriptedEvaluator", "--retriever", f"{HELPERS}:StandInRetriever"]
    return CliRunner().invoke(main, args, env=env)


def test_bad_input_is_one_line_before_any_work(tmp_path: Path, free_port: int) -> None:
    no_inputs = tmp_path / "bad.py"
    no_inputs.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    broken = tmp_path / "broken.py"
    broken.write_text("class Model(:\n")
    with ScriptedOpenAI() as server:
        cases = [
            (_optimize(tmp_path, no_inputs, server.base_url), f"{no_inputs}: not a KernelBench task: no top-level get_inputs"),
            (_optimize(tmp_path, broken, server.base_url), f"{broken}:1: not valid Python"),
            (_optimize(tmp_path, tmp_path / "none.py", server.base_url), "task file not found"),
            (_optimize(tmp_path, _task(tmp_path), server.base_url, key=False), "no API key"),
            (_optimize(tmp_path, _task(tmp_path), f"http://127.0.0.1:{free_port}/v1"), "cannot reach"),
        ]
        assert server.requests == []  # not one chat request was made
    for result, message in cases:
        assert result.exit_code == 2, result.output
        assert message in result.output and result.output.startswith("error: ")
        assert result.output.count("\n") == 1
    assert not (tmp_path / "home" / "runs").exists()


def test_without_cuda_optimize_pauses_before_the_gpu_step(tmp_path: Path) -> None:
    import torch

    from tests.test_loop_helpers import fenced, kernel

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with ScriptedOpenAI({"r00.generate.1": [fenced(kernel("speedup=1.2", "seed"))]}) as server:
        result = _optimize(tmp_path, _task(tmp_path), server.base_url, "--retriever",
                           f"{HELPERS}:StandInRetriever", plugins=False)  # the real harness evaluator
        assert server.steps() == ["r00.generate.1"]  # the LLM step ran, the GPU step did not
    assert result.exit_code == 3, result.output
    assert "no CUDA device is visible" in result.output and "pauses there" in result.output
    run_id = next((tmp_path / "home" / "runs").iterdir()).name
    assert f"run {run_id} waits for GPU step r00.eval" in result.output


def test_a_run_is_used_by_one_process_at_a_time(tmp_path: Path) -> None:

    from kernelskill.errors import KernelskillError

    run = RunStore(tmp_path).create(_task(tmp_path), {"model": "m"})
    with run.lock():
        with pytest.raises(KernelskillError, match="in use by another process"):
            with Run(run.path).lock():
                pass
    with Run(run.path).lock():  # released
        pass
