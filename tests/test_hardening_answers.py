"""Answers that no parser can take (thousands of nested brackets, 200,000 chained minus signs, bytes that
are not UTF-8) are refused before they are recorded: ``runs answer`` says why in one line and stores
nothing, an API answer is asked again, and a run that already holds such a step (written by an older
version) still resumes. The LLM's answers are the only stand-in (answer files, the local test server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelskill.pipeline.loop.agents import check_answer, code_expects, extract_code
from kernelskill.pipeline.loop.llm import parse_json_answer
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import TASK, fenced, kernel, planner_answer, review
from tests.test_split import PLUGINS, ks, llm_env

NESTED = "[" * 3000 + "]" * 3000
MINUS = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return " + \
        "-" * 200_000 + "x\n"


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "relu2.py"
    path.write_text(TASK)
    return path


def test_parsers_give_a_reason_instead_of_raising() -> None:
    assert parse_json_answer(NESTED, {"type": "object"})[0] is None
    assert parse_json_answer("{" + '"a":' * 3000 + "1" + "}" * 3000, {"type": "object"})[0] is None
    code, reason = extract_code(fenced(MINUS))
    assert code is None and "prefix operators" in reason
    deep = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x" + \
           " + x" * 400 + "\n"  # no bracket at all, but 400 levels of syntax tree (visitors recurse)
    code, reason = extract_code(fenced(deep))
    assert code is None and "nests" in reason
    assert check_answer(code_expects(), "x = " + "not " * 5000 + "x\n")  # a reason, not a RecursionError


def _paused_exchange_run(tmp_path: Path, task_file: Path) -> tuple[str, Path, str]:
    home = str(tmp_path / "home")
    first = ks("optimize", str(task_file), "--rounds", "1", "--llm", "exchange", "--home", home, *PLUGINS,
               env={"OPENAI_API_KEY": "", "KERNELSKILL_LLM_API_KEY": ""})
    assert first.exit_code == 3, first.output
    run_dir = next((tmp_path / "home" / "runs").iterdir())
    return home, run_dir, run_dir.name


@pytest.mark.parametrize("name,content", [
    ("latin1.txt", "caf\xe9 ModelNew".encode("latin-1")),
    ("nested.json", NESTED.encode()),
    ("minus.py", fenced(MINUS).encode()),
    ("huge.txt", b"x" * (5 * 2**20)),
])
def test_runs_answer_refuses_in_one_line_and_stores_nothing(tmp_path: Path, task_file: Path, name: str,
                                                            content: bytes) -> None:
    home, run_dir, run_id = _paused_exchange_run(tmp_path, task_file)
    before = sorted(p.name for p in (run_dir / "exchange").iterdir())
    events = (run_dir / "events.jsonl").read_bytes()
    answer = tmp_path / name
    answer.write_bytes(content)
    out = ks("runs", "answer", run_id, "r00.generate.1", str(answer), "--home", home)
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.output, out.output
    assert sorted(p.name for p in (run_dir / "exchange").iterdir()) == before
    assert (run_dir / "events.jsonl").read_bytes() == events


def test_a_run_holding_an_unparseable_step_still_resumes(tmp_path: Path, task_file: Path) -> None:
    """An older version recorded the answer before parsing it: the step counts as unanswered and is asked
    again; an answer file written by hand with such a text is set aside the same way."""
    home, run_dir, run_id = _paused_exchange_run(tmp_path, task_file)
    old = {"seq": 99, "ts": "2026-12-01T00:00:00.000000Z", "kind": "llm", "type": "llm_call",
           "step": "r00.generate.1", "round": 0, "data": {"role": "generator", "text": fenced(MINUS)}}
    with (run_dir / "events.jsonl").open("a") as fh:
        fh.write(json.dumps(old) + "\n")
    (run_dir / "exchange" / "r00.generate.1.answer.json").write_text(json.dumps(
        {"id": "r00.generate.1", "text": NESTED, "answered_by": "hand"}))
    for _ in range(2):  # the same on every resume: no crash, the step waits for an answer
        out = ks("runs", "resume", run_id, "--home", home, *PLUGINS)
        assert out.exit_code == 3 and "r00.generate.1" in out.output, out.output
        assert out.exception is None or isinstance(out.exception, SystemExit)
    assert (run_dir / "exchange" / "r00.generate.1.answer.json.rejected-1").is_file()
    assert "brackets nest" in (run_dir / "exchange" / "rejected.log").read_text()
    good = tmp_path / "good.txt"
    good.write_text(fenced(kernel("speedup=1.20", "seed")))
    assert ks("runs", "answer", run_id, "r00.generate.1", str(good), "--home", home).exit_code == 0
    out = ks("runs", "resume", run_id, "--home", home, *PLUGINS)
    assert out.exit_code == 3 and "r01.plan.1" in out.output, out.output


def test_an_api_answer_outside_the_bounds_is_asked_again_never_recorded(tmp_path: Path, task_file: Path) -> None:
    script = {"r00.generate.1": [NESTED, fenced(kernel("speedup=1.20", "seed"))], "r01.plan.1": [planner_answer(0)],
              "r01.optimize.1": [fenced(MINUS), fenced(kernel("speedup=1.60", "opt"))],
              "r01.review.1": [review(True)]}
    home = str(tmp_path / "home")
    with ScriptedOpenAI(script) as server:
        out = ks("optimize", str(task_file), "--rounds", "1", "--home", home, "--base-url", server.base_url,
                 *PLUGINS, env=llm_env())
    assert out.exit_code == 0, out.output
    run_dir = next((tmp_path / "home" / "runs").iterdir())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    refused = [e for e in events if e["type"] == "llm_refused"]
    assert [e["step"] for e in refused] == ["r00.generate.1", "r01.optimize.1"]
    assert all("text" not in e["data"] for e in refused)
    calls = [e for e in events if e["type"] == "llm_call"]
    assert all(len(e["data"]["text"]) < 10_000 for e in calls)
    out = ks("runs", "resume", run_dir.name, "--home", home, *PLUGINS)  # finished: nothing to do, no crash
    assert out.exception is None or isinstance(out.exception, SystemExit)
