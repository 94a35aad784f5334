"""Agent-in-the-loop and split runs through the CLI: LLM steps answered with ``runs answer`` (the
``exchange`` provider), GPU steps carried to another folder ("machine") with ``runs export`` / ``import``
and evaluated there by ``gpu_side`` with a scripted evaluator at the GPU boundary, ``runs resume --all``
over a folder of runs. The LLM's answers are the only other stand-in (scripted texts, or the local
OpenAI-compatible test server)."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.pipeline.runs import RunStore, gpu_side
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import PERMITTED, TASK, ScriptedEvaluator, fenced, kernel, planner_answer, review

HELPERS = Path(__file__).with_name("test_loop_helpers.py")
THIS = Path(__file__)
PLUGINS = ["--evaluator", f"{HELPERS}:ScriptedEvaluator", "--retriever", f"{HELPERS}:StandInRetriever"]


def ks(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), input=input, env=env or {})


def plan_json(method: str) -> str:
    return json.dumps({"method": method, "rationale": "memory bound", "plan": "float4 loads and stores"})


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "relu2.py"
    path.write_text(TASK)
    return path


# 1. LLM steps answered through files ---------------------------------------------------------------
def test_exchange_run_answered_with_runs_answer_to_completion(tmp_path: Path, task_file: Path) -> None:
    home = str(tmp_path / "home")
    first = ks("optimize", str(task_file), "--rounds", "1", "--llm", "exchange", "--home", home, *PLUGINS,
               env={"OPENAI_API_KEY": "", "KERNELSKILL_LLM_API_KEY": ""})  # no key, no endpoint: not needed
    assert first.exit_code == 3, first.output
    run_id = next((tmp_path / "home" / "runs").iterdir()).name
    run_dir = tmp_path / "home" / "runs" / run_id
    assert f"kernelskill runs answer {run_id} r00.generate.1 ANSWER_FILE --home {home}" in first.output
    assert json.loads((run_dir / "run.json").read_text())["provider"] == "exchange"

    def pending() -> list[dict]:
        out = ks("runs", "pending", run_id, "--home", home, "--json")
        assert out.exit_code == 0, out.output
        return json.loads(out.output)

    def answer(step: str, text: str) -> Any:
        path = tmp_path / f"{step}.answer.txt"
        path.write_text(text)
        return ks("runs", "answer", run_id, step, str(path), "--home", home)

    def rejected(step: str, text: str, reason: str) -> None:
        before = sorted(p.name for p in (run_dir / "exchange").iterdir())
        out = answer(step, text)
        assert out.exit_code == 2 and reason in out.output and "nothing stored" in out.output, out.output
        assert len(out.output.strip().splitlines()) == 1  # one line
        assert sorted(p.name for p in (run_dir / "exchange").iterdir()) == before
        assert [p["id"] for p in pending()] == [step]  # still waiting for it

    def resume(expect_exit: int = 3) -> Any:
        out = ks("runs", "resume", run_id, "--home", home, *PLUGINS)
        assert out.exit_code == expect_exit, out.output
        return out

    # the seed: a readable prompt with the expected shape; prose without code is refused
    [step] = pending()
    assert step["id"] == "r00.generate.1" and step["role"] == "generator" and step["expects"] == "code"
    prompt = (run_dir / step["prompt"]).read_text()
    assert "class ModelNew" in prompt and "def get_inputs" in prompt and "runs answer" in prompt
    request = json.loads((run_dir / "exchange" / "r00.generate.1.request.json").read_text())
    assert request["role"] == "generator" and request["expects"]["kind"] == "code"
    rejected("r00.generate.1", "I would write a CUDA kernel here.", "no code block defines class ModelNew")
    rejected("r00.generate.1", fenced("class ModelNew(:\n    pass\n"), "the code does not parse")
    stdin = ks("runs", "answer", run_id, "r00.generate.1", "-", "--home", home,
               input=fenced(kernel("speedup=1.20", "seed")))
    assert stdin.exit_code == 0 and "runs resume" in stdin.output, stdin.output
    again = answer("r00.generate.1", fenced(kernel("speedup=9.0", "other")))
    assert again.exit_code == 2 and "already answered" in again.output

    # seed evaluated, parent profiled and queried: the planner is asked with the permitted list
    out = resume()
    assert "r01.plan.1" in out.output
    [step] = pending()
    assert step["role"] == "planner" and step["expects"] == "json"
    request = json.loads((run_dir / "exchange" / "r01.plan.1.request.json").read_text())
    assert request["expects"]["method_in"] == PERMITTED
    rejected("r01.plan.1", plan_json("tensor_core_mma"), "`tensor_core_mma` is not in the permitted list")
    rejected("r01.plan.1", json.dumps({"method": "coalesced_access"}), "missing required field 'plan'")
    assert answer("r01.plan.1", plan_json("vectorized_access_16b")).exit_code == 0

    resume()
    assert [p["role"] for p in pending()] == ["optimizer"]
    assert answer("r01.optimize.1", fenced(kernel("speedup=1.80", "vec"))).exit_code == 0

    resume()  # evaluated; the reviewer decides whether it becomes the parent
    assert [p["id"] for p in pending()] == ["r01.review.1"]
    rejected("r01.review.1", '{"accept": "yes"}', "expected boolean")
    by = ks("runs", "answer", run_id, "r01.review.1", "-", "--by", "review agent", "--home", home, input=review(True))
    assert by.exit_code == 0, by.output

    done = ks("runs", "resume", run_id, "--home", home, "--json", *PLUGINS)
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    assert result["status"] == "finished" and result["verified"]
    assert result["best"]["speedup"] == pytest.approx(1.80) and result["best"]["method"] == "vectorized_access_16b"
    assert pending() == []

    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    calls = [e for e in events if e["type"] == "llm_call"]
    assert [e["step"] for e in calls] == ["r00.generate.1", "r01.plan.1", "r01.optimize.1", "r01.review.1"]
    assert {e["data"]["provider"] for e in calls} == {"exchange"}
    assert Counter(e["type"] for e in events if e["kind"] == "gpu") == {"eval": 3, "profile": 1}
    assert [e["data"]["before"] for e in events if e["type"] == "run_paused"] == [
        "r00.generate.1", "r01.plan.1", "r01.optimize.1", "r01.review.1"]
    assert {e["data"]["model"] for e in calls} == {None}  # no model wrote these answers
    report = (run_dir / "report.md").read_text()
    assert "vectorized_access_16b" in report
    assert "answered by: runs answer (exchange) x3, review agent (exchange) x1" in report


def test_an_answer_file_written_by_hand_goes_through_the_reask(tmp_path: Path, task_file: Path) -> None:
    """An answer put straight into exchange/ (not through `runs answer`) is parsed like an API answer:
    a planner naming a method outside the list is asked again with the reason."""
    from kernelskill.pipeline.runs.exchange import Answer, Exchange

    home = str(tmp_path / "home")
    assert ks("optimize", str(task_file), "--rounds", "1", "--home", home, *PLUGINS,
              env={"KERNELSKILL_LLM_PROVIDER": "exchange"}).exit_code == 3  # the provider chosen by environment
    run_dir = next((tmp_path / "home" / "runs").iterdir())
    ex = Exchange(run_dir)
    ex.put_answer(Answer(id="r00.generate.1", text=fenced(kernel("speedup=1.20", "seed"))))
    assert ks("runs", "resume", run_dir.name, "--home", home, *PLUGINS).exit_code == 3
    ex.put_answer(Answer(id="r01.plan.1", text=plan_json("cuda_graphs")))
    out = ks("runs", "resume", run_dir.name, "--home", home, *PLUGINS)
    assert out.exit_code == 3 and "r01.plan.2" in out.output
    assert "`cuda_graphs` is not in the permitted list" in ex.prompt("r01.plan.2")


# 2. GPU steps on another machine -------------------------------------------------------------------
SCRIPT = {"r00.generate.1": [fenced(kernel("speedup=1.20", "seed"))], "r01.plan.1": [planner_answer(0)],
          "r01.optimize.1": [fenced(kernel("speedup=1.60", "opt"))], "r01.review.1": [review(True)]}


def llm_env() -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test", "KERNELSKILL_LLM_TIMEOUT_S": "5", "KERNELSKILL_LLM_MODEL": "test-model"}


def test_gpu_steps_carried_to_another_machine_and_back(tmp_path: Path, task_file: Path) -> None:
    here, there = tmp_path / "laptop", tmp_path / "gpu-box"
    gpu = ScriptedEvaluator()  # the GPU boundary of the other machine
    trips = 0
    with ScriptedOpenAI(SCRIPT) as server:
        out = ks("optimize", str(task_file), "--rounds", "1", "--stop-before", "gpu", "--home", str(here),
                 "--base-url", server.base_url, *PLUGINS, env=llm_env())
        run_id = next((here / "runs").iterdir()).name
        while out.exit_code == 3:
            assert "gpu_side" in out.output and "runs export" in out.output
            wrong = ks("runs", "answer", run_id, "r00.eval", str(task_file), "--home", str(here))
            assert trips or (wrong.exit_code == 2 and "is a GPU step" in wrong.output), wrong.output
            archive = tmp_path / "carry.tar.gz"
            assert ks("runs", "export", run_id, "-o", str(archive), "--home", str(here)).exit_code == 0
            imported = ks("runs", "import", str(archive), "--into", str(there / "runs"), "--replace")
            assert imported.exit_code == 0, imported.output
            rows = gpu_side.evaluate_pending(gpu_side.find_runs(there / "runs"), gpu)
            assert len(rows) == 1 and rows[0]["run"] == run_id and not rows[0]["status"].startswith("error")
            assert ks("runs", "export", run_id, "-o", str(archive), "--home", str(there)).exit_code == 0
            back = ks("runs", "import", str(archive), "--home", str(here), "--replace")
            assert back.exit_code == 0, back.output
            trips += 1
            out = ks("runs", "resume", run_id, "--stop-before", "gpu", "--home", str(here), "--json", *PLUGINS,
                     env=llm_env() | {"KERNELSKILL_LLM_BASE_URL": server.base_url})
        assert out.exit_code == 0, out.output
        counts = Counter(server.steps())
    result = json.loads(out.output)
    assert result["status"] == "finished" and result["best"]["speedup"] == pytest.approx(1.60)
    assert result["best"]["verified_speedup"] == pytest.approx(1.60)
    assert trips == 4  # r00.eval, profile of the seed, r01.eval, the re-verification
    assert Counter(k for k, _ in gpu.calls) == {"evaluate": 3, "profile": 1}  # each GPU step once
    assert set(counts.values()) == {1} and set(counts) == set(SCRIPT)  # each LLM step once
    # the run that came back is the one the GPU box measured
    evals = [json.loads(line) for line in (here / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    assert [(e["step"], e["round"]) for e in evals if e["kind"] == "gpu"] == [
        ("r00.eval", 0), ("profile.r00.generate", 1), ("r01.eval", 1), ("verify.r01.optimize", 1)]


def test_the_bare_box_command_imports_evaluates_exports_and_profiles_ahead(tmp_path: Path, task_file: Path,
                                                                           monkeypatch, capsys) -> None:
    """gpu_side's own command line on the other machine (--import, --export-to), with the harness
    replaced by the scripted evaluator at the GPU boundary; profiling ahead saves the profile's trip."""
    here, box, out_dir = tmp_path / "laptop", tmp_path / "box" / "runs", tmp_path / "box-out"
    monkeypatch.setattr(gpu_side, "HarnessGPU", lambda **kw: _CheckedScripted())
    trips = 0
    said = ""  # gpu_side's progress lines on stderr
    with ScriptedOpenAI(SCRIPT) as server:
        out = ks("optimize", str(task_file), "--rounds", "1", "--stop-before", "gpu", "--home", str(here),
                 "--base-url", server.base_url, *PLUGINS, env=llm_env())
        run_id = next((here / "runs").iterdir()).name
        while out.exit_code == 3:
            archive = tmp_path / "carry" / f"{run_id}.kernelskill-run.tar.gz"
            assert ks("runs", "export", run_id, "-o", str(archive), "--home", str(here)).exit_code == 0
            assert gpu_side.main([str(box), "--import", str(archive), "--export-to", str(out_dir)]) == 0
            said += capsys.readouterr().err
            back = ks("runs", "import", str(out_dir / archive.name), "--home", str(here), "--replace")
            assert back.exit_code == 0, back.output
            trips += 1
            out = ks("runs", "resume", run_id, "--stop-before", "gpu", "--home", str(here), "--json", *PLUGINS,
                     env=llm_env() | {"KERNELSKILL_LLM_BASE_URL": server.base_url})
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["best"]["verified_speedup"] == pytest.approx(1.60)
    assert trips == 2  # r00.eval with the seed's profile ahead, then r01.eval (the last round) with the
    # re-verification ahead; no profile of the last round's candidate: nothing plans from it
    assert re.search(rf"gpu side \(\d+ s\): {run_id} r00\.eval: ok \[1/1\]", said), said
    assert "1 pending GPU steps (1 evaluations: all built first, in parallel)" in said
    events = [json.loads(line) for line in (here / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    # the last candidate was not reviewed yet on the box: its runner-up (the seed) is re-verified ahead too, in
    # case the review turns it down; here it accepted it, so the loop used the first one
    assert [e["step"] for e in events if e["kind"] == "gpu"] == ["r00.eval", "profile.r00.generate", "r01.eval",
                                                               "verify.r01.optimize", "verify.r00.generate"]


class _CheckedScripted(ScriptedEvaluator):
    def check(self) -> None:
        return None


def test_import_never_loses_steps_and_export_refuses_what_is_not_portable(tmp_path: Path, task_file: Path) -> None:
    home = str(tmp_path / "home")
    assert ks("optimize", str(task_file), "--rounds", "1", "--llm", "exchange", "--home", home,
              *PLUGINS).exit_code == 3
    run_dir = next((tmp_path / "home" / "runs").iterdir())
    old = tmp_path / "old.tar.gz"
    assert ks("runs", "export", run_dir.name, "-o", str(old), "--home", home).exit_code == 0
    with tarfile_names(old) as names:
        assert f"{run_dir.name}/task.py" in names and not any(n.endswith(".lock") for n in names)
    # the local run moves on; the stale archive cannot replace it
    ex_answer = tmp_path / "a.txt"
    ex_answer.write_text(fenced(kernel("speedup=1.20", "seed")))
    assert ks("runs", "answer", run_dir.name, "r00.generate.1", str(ex_answer), "--home", home).exit_code == 0
    assert ks("runs", "resume", run_dir.name, "--home", home, *PLUGINS).exit_code == 3
    log_before = (run_dir / "events.jsonl").read_bytes()
    stale = ks("runs", "import", str(old), "--home", home, "--replace")
    assert stale.exit_code == 2 and "does not extend the local run" in stale.output
    assert (run_dir / "events.jsonl").read_bytes() == log_before
    plain = ks("runs", "import", str(old), "--home", home)
    assert plain.exit_code == 2 and "exists already" in plain.output
    # an absolute path, a missing candidate: refused, no archive written
    (run_dir / "notes.md").write_text(f"built in {run_dir.resolve()}\n")
    refused = ks("runs", "export", run_dir.name, "-o", str(tmp_path / "x.tar.gz"), "--home", home)
    assert refused.exit_code == 2 and "notes.md:1: names this machine" in refused.output
    (run_dir / "notes.md").unlink()
    (run_dir / "candidates" / "r00.generate.py").unlink()
    refused = ks("runs", "export", run_dir.name, "-o", str(tmp_path / "x.tar.gz"), "--home", home)
    assert refused.exit_code == 2 and "'candidates/r00.generate.py' is not a file inside the run" in refused.output
    assert not (tmp_path / "x.tar.gz").exists()


class tarfile_names:
    def __init__(self, path: Path) -> None:
        import tarfile

        self.tar = tarfile.open(path)

    def __enter__(self) -> set[str]:
        return set(self.tar.getnames())

    def __exit__(self, *exc: object) -> None:
        self.tar.close()


# 3. resume --all: many runs, their GPU steps in one batch ---------------------------------------------
class BatchingEvaluator(ScriptedEvaluator):
    """The scripted GPU boundary, offering a batch entry point like gpu_side.HarnessGPU; each batch's
    size is appended to the file named by ``KS_TEST_BATCH_LOG``."""

    def evaluate_many(self, steps: list[Any]) -> list[dict[str, Any]]:
        with open(os.environ["KS_TEST_BATCH_LOG"], "a") as fh:
            fh.write(f"{len(steps)}\n")
        return [self.evaluate(s.run.path / s.request["task"], s.run.path / s.request["candidate"],
                              seed=s.request.get("seed")) for s in steps]


def test_resume_all_advances_every_run_with_batched_gpu_steps(tmp_path: Path, task_file: Path) -> None:
    home = tmp_path / "home"

    def responder(step: str, role: str, body: dict[str, Any]) -> Any:  # both runs get the same answers
        reply = SCRIPT[step][0]
        return reply(step, role, body) if callable(reply) else reply

    with ScriptedOpenAI(responder=responder) as server:
        base = ["--home", str(home), "--base-url", server.base_url]
        for _ in range(2):
            out = ks("optimize", str(task_file), "--rounds", "1", "--stop-before", "gpu", *base, *PLUGINS,
                     env=llm_env())
            assert out.exit_code == 3, out.output
        runs_dir = home / "runs"
        assert len(list(runs_dir.iterdir())) == 2
        batch_log = tmp_path / "batches.txt"
        out = ks("runs", "resume", "--all", str(runs_dir), *base, "--json", "--evaluator",
                 f"{THIS}:BatchingEvaluator", "--retriever", f"{HELPERS}:StandInRetriever",
                 env=llm_env() | {"KS_TEST_BATCH_LOG": str(batch_log)})
        assert out.exit_code == 0, out.output
        assert Counter(server.steps()) == {s: 2 for s in SCRIPT}
    rows = json.loads(out.output)
    assert [r["status"] for r in rows] == ["finished", "finished"]
    assert [r["best_speedup"] for r in rows] == [pytest.approx(1.60)] * 2
    # r00.eval, r01.eval, verify: both runs in one call each time; their jobs are identical (same task, same
    # answers), so each batch measures one and records it in both runs
    assert batch_log.read_text().split() == ["1", "1", "1"]
    for run in RunStore(runs_dir).list():
        assert run.status() == "finished"
        assert len(run.log.of_type("profile")) == 1  # the profile went through the same batch call path


def test_resume_all_without_a_gpu_stops_every_run_before_its_gpu_step(tmp_path: Path, task_file: Path) -> None:
    home = tmp_path / "home"
    for _ in range(2):
        assert ks("optimize", str(task_file), "--rounds", "1", "--llm", "exchange", "--home", str(home),
                  *PLUGINS).exit_code == 3
    runs_dir = home / "runs"
    from kernelskill.pipeline.runs.exchange import Answer, Exchange

    for run_dir in runs_dir.iterdir():
        Exchange(run_dir).put_answer(Answer(id="r00.generate.1", text=fenced(kernel("speedup=1.2", "s"))))
    out = ks("runs", "resume", "--all", str(runs_dir), "--home", str(home), "--json",
             "--retriever", f"{HELPERS}:StandInRetriever")  # the real harness evaluator: no CUDA here
    assert out.exit_code == 3, out.output
    rows = json.loads(out.output)
    assert [r["status"] for r in rows] == ["paused", "paused"]
    assert all("waits for GPU step r00.eval" in r["waiting"] for r in rows)
    assert [r["waits_for"] for r in rows] == ["gpu step r00.eval"] * 2
    table = ks("runs", "resume", "--all", str(runs_dir), "--home", str(home),
               "--retriever", f"{HELPERS}:StandInRetriever")
    assert table.exit_code == 3 and table.output.count("gpu step r00.eval") == 2  # short in the table
    assert table.output.count("waits for GPU step r00.eval") == 2  # the full instructions below it
    single = ks("runs", "resume", rows[0]["run"], "--home", str(home), "--retriever", f"{HELPERS}:StandInRetriever")
    assert single.exit_code == 3 and "waits for GPU step r00.eval" in single.output  # no CUDA: stops before it
    assert gpu_side.main([str(runs_dir), "--dry-run"]) == 0
    # both carried at once: one archive each, unpacked together on the box
    ids = [r["run"] for r in rows]
    carried = ks("runs", "export", *ids, "-o", f"{tmp_path / 'carry'}/", "--home", str(home), "--json")
    assert carried.exit_code == 0, carried.output
    archives = [row["archive"] for row in json.loads(carried.output)]
    assert [Path(a).name for a in archives] == [f"{i}.kernelskill-run.tar.gz" for i in ids]
    assert gpu_side.main([str(tmp_path / "box"), "--import", *archives, "--dry-run"]) == 0
    assert [s.request["step"] for s in gpu_side.pending_gpu_steps(gpu_side.find_runs(tmp_path / "box"))] == [
        "r00.eval", "r00.eval"]
    one_file = ks("runs", "export", *ids, "-o", str(tmp_path / "x.tar.gz"), "--home", str(home))
    assert one_file.exit_code == 2 and "several runs need a folder" in one_file.output
    # optimize behaves as runs resume does: a new run and a resumed one go on up to the GPU step and pause there
    stand_in = ["--retriever", f"{HELPERS}:StandInRetriever"]
    fresh = ks("optimize", str(task_file), "--llm", "exchange", "--home", str(home), *stand_in)
    assert fresh.exit_code == 3 and "no CUDA device" in fresh.output and "pauses there" in fresh.output, fresh.output
    assert "waits for the generator answer of LLM step r00.generate.1" in fresh.output
    resumed = ks("optimize", "--resume", ids[0], "--home", str(home), *stand_in)
    assert resumed.exit_code == 3 and "no CUDA device" in resumed.output, resumed.output
    assert f"run {ids[0]} waits for GPU step r00.eval" in resumed.output
    assert f"kernelskill runs resume {ids[0]} --home {home}" in resumed.output
    prompt = (runs_dir / ids[0] / "exchange" / "r00.generate.1.prompt.md").read_text()
    assert f"then `kernelskill runs resume {ids[0]}`" in prompt  # the prompt file names the run
