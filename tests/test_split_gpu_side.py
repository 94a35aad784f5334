"""``python -m kernelskill.pipeline.runs.gpu_side`` as it runs on a bare GPU box: in a subprocess where
pydantic, click, rich, jinja2, duckdb, chromadb, openai and yaml cannot be imported, with the real
harness (its CPU mode here, a pure-PyTorch candidate; there is no GPU on this machine), on a run that
the planning side paused before its GPU step. The planning side's resume picks the result up."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from kernelskill.config import LLMSettings
from kernelskill.pipeline.loop import Loop, LoopOptions
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.pipeline.runs import RunStore, pending_request
from kernelskill.pipeline.runs.portable import ARCHIVE_SUFFIX, export_run, import_run
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import ADD_CANDIDATE as CANDIDATE
from tests.test_loop_helpers import ADD_TASK as TASK
from tests.test_loop_helpers import StandInRetriever, fenced

BLOCKED = ("pydantic", "click", "rich", "jinja2", "duckdb", "chromadb", "openai", "yaml", "sentence_transformers")

BARE_BOX = textwrap.dedent(f"""
    import importlib.abc, runpy, sys

    class NotOnTheGpuBox(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BLOCKED!r}:
                raise ImportError(f"{{name}} is not installed on the GPU box")
            return None

    sys.meta_path.insert(0, NotOnTheGpuBox())
    sys.argv = ["gpu_side", *sys.argv[1:]]
    try:
        runpy.run_module("kernelskill.pipeline.runs.gpu_side", run_name="__main__")
    finally:
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r})
        print("LOADED", loaded, file=sys.stderr)
""")



def bare_box(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-c", BARE_BOX, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def test_gpu_side_imports_only_torch_and_stdlib(tmp_path: Path) -> None:
    done = bare_box(str(tmp_path), "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no pending GPU steps" in done.stdout
    assert "LOADED []" in done.stderr


def test_gpu_side_evaluates_a_paused_run_with_the_real_harness(tmp_path: Path) -> None:
    task = tmp_path / "add.py"
    task.write_text(TASK)
    options = LoopOptions(rounds=0, stop_before=["gpu"])
    store = RunStore(tmp_path / "runs")
    run = store.create(task, {"model": "test-model", "options": options.model_dump(exclude={"stop_before"}),
                              "harness": {"timing_trials": 10, "correctness_trials": 2}})
    settings = LLMSettings(model="test-model", api_key="sk-test", max_retries=0)
    with ScriptedOpenAI({"r00.generate.1": [fenced(CANDIDATE)]}) as server:
        settings.base_url = server.base_url
        paused = Loop(run, LLMClient.from_settings(settings), None, StandInRetriever(), options).execute()
    assert paused.status == "paused" and pending_request(run)["request"]["step"] == "r00.eval"

    # carried as one archive to the "box" (another folder), evaluated there, carried back
    archive = export_run(run.path, tmp_path / "carry" / f"{run.id}.tar.gz")
    box = tmp_path / "box"
    done = bare_box(str(box / "runs"), "--import", str(archive), "--export-to", str(box / "out"), "--allow-cpu",
                    "--json", "--no-profile-ahead", cwd=box)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LOADED []" in done.stderr  # the run store, the harness, torch: nothing of the planning side
    row, ahead = json.loads(done.stdout)  # rounds=0: the seed is the last round, its re-verification goes ahead
    assert row["step"] == "r00.eval" and row["status"] == "ok" and row["speedup"] > 0
    assert (ahead["step"], ahead["type"], ahead["status"]) == ("verify.r00.generate", "eval ahead", "ok")
    import_run(box / "out" / f"{run.id}{ARCHIVE_SUFFIX}", store.root, replace=True)

    # the planning side resumes as if the evaluation had run there: the recorded result is used
    again = store.open(run.id)
    event = again.log.find("r00.eval", "eval")
    assert event["kind"] == "gpu" and event["data"]["result"]["speedup"] == row["speedup"]
    assert event["data"]["candidate"] == "candidates/r00.generate.py"
    assert str(tmp_path) not in (again.path / "events.jsonl").read_text()
    with ScriptedOpenAI({}) as server:
        settings.base_url = server.base_url
        done_run = Loop(again, LLMClient.from_settings(settings), None, StandInRetriever(), options).execute()
        assert server.steps() == []  # nothing asked twice
    assert done_run.status == "finished" and done_run.verified  # no trip left for the re-verification
    verify = again.log.find("verify.r00.generate", "eval")
    assert verify["kind"] == "gpu" and verify["data"]["seed"] == options.verify_seed


# A scripted "agent" for the split run on the H200 (the lead's GPU check) ------------------------------
def answer_from_script(runs_dir: Path, script: dict[str, list]) -> list[str]:
    """Answer every pending LLM request of every run under ``runs_dir`` from a script in the test
    server's format (step -> answers; a callable gets ``(step, role, {"messages": ...})``), through the
    same check as ``kernelskill runs answer``. Returns the steps answered."""
    from kernelskill.pipeline.loop.agents import check_answer
    from kernelskill.pipeline.runs.exchange import Answer, Exchange

    answered = []
    for run in RunStore(runs_dir).list():
        exchange = Exchange(run.path)
        for request in exchange.pending("llm"):
            reply = script[request.id][-1]
            text = reply(request.id, request.role, {"messages": request.payload["messages"]}) if callable(reply) \
                else reply
            reason = check_answer(request.expects, text)
            assert not reason, f"{request.id}: {reason}"
            exchange.put_answer(Answer(id=request.id, text=text, answered_by="scripted agent"))
            answered.append(f"{run.id}:{request.id}")
    return answered


if __name__ == "__main__":  # python -m tests.test_split_gpu_side task FILE | answer RUNS_DIR
    from tests.test_loop_gpu import SCRIPT as GPU_SCRIPT
    from tests.test_loop_gpu import TASK as GPU_TASK

    if sys.argv[1] == "task":
        Path(sys.argv[2]).parent.mkdir(parents=True, exist_ok=True)
        Path(sys.argv[2]).write_text(GPU_TASK)
    else:
        print("\n".join(answer_from_script(Path(sys.argv[2]), GPU_SCRIPT)) or "nothing pending")
