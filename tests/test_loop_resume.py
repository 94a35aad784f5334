"""``kernelskill optimize`` in a subprocess, killed with SIGKILL in the middle of a round, resumed,
interrupted with Ctrl-C, resumed again: nothing lost, nothing repeated (counted at the test server and at
the evaluator)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop_helpers import TASK, main_script

HELPERS = Path(__file__).with_name("test_loop_helpers.py")
REPO = Path(__file__).resolve().parents[1]


def cli(home: Path, url: str, eval_log: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "kernelskill", "optimize", *args, "--home", str(home), "--base-url", url,
            "--evaluator", f"{HELPERS}:ScriptedEvaluator", "--retriever", f"{HELPERS}:StandInRetriever", "--json"]


def env(eval_log: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSKILL_")}
    out.update(OPENAI_API_KEY="sk-test", KS_TEST_EVAL_LOG=str(eval_log), KERNELSKILL_LLM_TIMEOUT_S="30",
               KERNELSKILL_LLM_BACKOFF_S="0.01", KERNELSKILL_LLM_MODEL="test-model", PYTHONUNBUFFERED="1",
               PYTHONPATH=str(REPO))
    return out


def test_kill_9_and_ctrl_c_mid_round_then_resume(tmp_path: Path) -> None:
    home, eval_log = tmp_path / "home", tmp_path / "evals.jsonl"
    task = tmp_path / "relu2.py"
    task.write_text(TASK)
    script = main_script(slow_step="r03.optimize.1", slow_s=120, timeout_fault=False)
    script["r05.plan.1"].insert(0, {"delay": 120, "text": "never read"})
    with ScriptedOpenAI(script) as server:
        proc = subprocess.Popen(cli(home, server.base_url, eval_log, str(task), "--rounds", "5"), env=env(eval_log),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        deadline = time.monotonic() + 60
        while "r03.optimize.1" not in server.steps():
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "the loop never reached round 3"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # mid-round: round 3 planned, its optimizer answer in flight
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL

        runs = list((home / "runs").iterdir())
        assert len(runs) == 1
        run_dir = runs[0]
        killed_events = (run_dir / "events.jsonl").read_text().splitlines()
        assert json.loads(killed_events[-1])["step"] == "r03.plan"  # the last thing recorded before the kill
        evals_before = eval_log.read_text().splitlines()

        # resumed, then interrupted with Ctrl-C (SIGINT) while round 5's planner answer is in flight
        proc = subprocess.Popen(cli(home, server.base_url, eval_log, "--resume", run_dir.name), env=env(eval_log),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        while "r05.plan.1" not in server.steps():
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline + 60, "the resumed loop never reached round 5"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 130
        assert err.decode().strip().splitlines()[-1] == (f"interrupted: resume with `kernelskill optimize --resume "
                                                         f"{run_dir.name}`")

        done = subprocess.run(cli(home, server.base_url, eval_log, "--resume", run_dir.name), env=env(eval_log),
                              capture_output=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        out = json.loads(done.stdout)
        counts = Counter(server.steps())

    assert out["status"] == "finished" and out["best"]["speedup"] == 2.4 and out["verified"]
    # every LLM step asked once; the 429/500 faults once more; the killed request once more (never answered)
    assert set(counts) == set(script)
    assert {s: c for s, c in counts.items() if c != 1} == {"r02.plan.1": 2, "r02.optimize.1": 2,
                                                           "r03.optimize.1": 2, "r05.plan.1": 2}
    # every evaluation executed exactly once across both processes; nothing ran twice after the resume
    evals = [json.loads(line) for line in eval_log.read_text().splitlines()]
    assert len(evals_before) == 5  # r00, r01, profile r01, r02, profile r02
    assert Counter((e["kind"], e["candidate"]) for e in evals) == {
        ("evaluate", "r00.generate.py"): 1, ("evaluate", "r01.repair.py"): 1, ("profile", "r01.repair.py"): 1,
        ("evaluate", "r02.optimize.py"): 1, ("profile", "r02.optimize.py"): 1, ("evaluate", "r03.optimize.py"): 1,
        ("evaluate", "r04.repair.py"): 1, ("evaluate", "r05.optimize.py"): 2}  # its eval + the re-verification
    # the log: no step recorded twice, sequence numbers unbroken, the pre-kill events kept verbatim
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    keys = [(e["step"], e["type"]) for e in events if e["step"]]
    assert len(keys) == len(set(keys))
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [json.dumps(e) for e in events[: len(killed_events)]] == [
        json.dumps(json.loads(line)) for line in killed_events]
    assert (run_dir / "best.py").is_file() and "| 5 | optimize | kernel_fusion |" in (run_dir / "report.md").read_text()
