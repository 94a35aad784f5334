"""``kernelskill bench`` on CPU: a 6-task suite whose LLM steps go over HTTP to the local OpenAI-compatible
test server (the real ``openai`` client) and whose GPU steps go to a scripted evaluator at the GPU boundary;
a suite killed with SIGKILL mid-way and started again; bad input; solutions measured with ``bench eval``;
the exchange provider over a whole suite; the budget. The report's numbers are recomputed here from the
runs' event logs, without the report code."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from tests.openai_test_server import ScriptedOpenAI
from tests.test_bench_helpers import responder, task_source, write_level

HELPERS = Path(__file__).with_name("test_bench_helpers.py")
PLUGINS = ["--evaluator", f"{HELPERS}:CountingEvaluator", "--retriever", f"{HELPERS}:StandInRetriever",
           "--gpu-slots", "2", "--no-progress"]
NAMES = ["Relu", "Gelu", "Add", "Mul", "Sub", "Div"]
ROOT = Path(__file__).resolve().parents[1]


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test", "KERNELSKILL_LLM_MODEL": "test-model", "KERNELSKILL_LLM_TIMEOUT_S": "20",
            "KERNELSKILL_LLM_BACKOFF_S": "0.01", "KS_TEST_EVAL_LOG": str(tmp_path / "evals.log")}


def ks(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), env=env)


def json_of(out: Any) -> Any:
    """The JSON document a ``--json`` command printed (the one-line notes on stderr follow it)."""
    text = out.output
    start = min(i for i in (text.find("{"), text.find("[")) if i >= 0)
    return json.JSONDecoder().raw_decode(text[start:])[0]


def suite_args(tmp_path: Path, server: ScriptedOpenAI, suite: str = "suite", *extra: str) -> list[str]:
    return ["bench", "run", "--kernelbench", str(tmp_path / "kb"), "--level", "1", "--rounds", "2",
            "--home", str(tmp_path / "home"), "--suite", str(tmp_path / suite), "--base-url", server.base_url,
            "--llm-concurrency", "3", *PLUGINS, *extra]


def asked(server: ScriptedOpenAI) -> Counter[tuple[str, str]]:
    """(task, step) -> how often the server was asked."""
    out: Counter[tuple[str, str]] = Counter()
    for r in server.requests:
        text = " ".join(str(m.get("content", "")) for m in r["messages"])
        task = text.split("# suite-task: ", 1)[1].split()[0] if "# suite-task: " in text else "?"
        out[(task, r["step"])] += 1
    return out


def evaluated(log: Path) -> Counter[tuple[str, ...]]:
    return Counter(tuple(json.loads(line)) for line in log.read_text().splitlines()) if log.exists() else Counter()


def recorded(suite: Path) -> dict[str, set[tuple[str, str]]]:
    """Per run: the (step, type) of every event with a step."""
    out = {}
    for events in sorted(suite.glob("runs/*/events.jsonl")):
        rows = [json.loads(line) for line in events.read_text().splitlines() if line.strip().endswith("}")]
        out[events.parent.name] = {(e["step"], e["type"]) for e in rows if e.get("step")}
    return out


def recompute(suite: Path) -> dict[str, Any]:
    """The report's headline numbers straight from the event logs (independent of pipeline.bench.report)."""
    manifest = json.loads((suite / "suite.json").read_text())
    speed, comp, final = {}, {}, {}
    for task in manifest["tasks"]:
        if task["error"]:
            continue
        events = [json.loads(line) for line in (suite / "runs" / task["run_id"] / "events.jsonl").read_text().splitlines()]
        evals = [e for e in events if e["type"] == "eval"]
        bad = {e["data"]["candidate"] for e in evals if e["step"].startswith("verify.")
               and not e["data"]["result"].get("correct")}
        good = [e["data"]["result"] for e in evals if not e["step"].startswith("verify.")
                and e["data"]["result"]["status"] == "ok" and e["data"]["candidate"] not in bad]
        if good:
            best = max(good, key=lambda r: r["speedup"])
            speed[task["name"]] = best["speedup"]
            comp[task["name"]] = best["compile_ms"] / best["candidate_ms"]
        # what the run delivers: the loop's final pick, as its re-verification measured it
        [finished] = [e["data"]["best"]["candidate"] for e in events if e["type"] == "run_finished"] or [None]
        checks = [e["data"]["result"]["speedup"] for e in evals if e["step"].startswith("verify.")
                  and e["data"]["candidate"] == finished and e["data"]["result"].get("correct")]
        if checks:
            final[task["name"]] = checks[-1]
    n = len(manifest["tasks"])
    return {"correct": len(speed), "tasks": n, "final": final,
            "fast_eager": {p: sum(v > p for v in speed.values()) / n for p in (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)},
            "fast_compile": {p: sum(v > p for v in comp.values()) / n for p in (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)},
            "geomean": math.exp(sum(map(math.log, speed.values())) / len(speed)) if speed else None,
            "speedups": speed}


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    write_level(tmp_path / "kb", 1, NAMES)
    return tmp_path / "kb"


def check_report_against_events(tmp_path: Path, suite: Path) -> dict[str, Any]:
    out = ks("bench", "report", str(suite), "--json", "--html", str(tmp_path / "report.html"))
    report = json_of(out)
    mine = recompute(suite)
    overall = report["overall"]
    assert overall["tasks"] == mine["tasks"] and overall["correct"] == mine["correct"]
    for p, value in mine["fast_eager"].items():
        assert overall["fast_p_eager"][str(p)] == pytest.approx(value, abs=1e-6)
    for p, value in mine["fast_compile"].items():
        assert overall["fast_p_compile"][str(p)] == pytest.approx(value, abs=1e-6)
    assert overall["geomean_speedup"] == pytest.approx(mine["geomean"], rel=1e-5)
    assert {t["task"]: t["speedup"] for t in report["tasks"] if t["correct"]} == pytest.approx(mine["speedups"])
    assert report["levels"]["1"]["tasks"] == 6
    assert mine["final"] and {t["task"]: t["final_speedup"] for t in report["tasks"]
                              if t["final_speedup"]} == pytest.approx(mine["final"])
    assert overall["final_picks"] == len(mine["final"])
    assert overall["final_geomean_speedup"] == pytest.approx(
        math.exp(sum(map(math.log, mine["final"].values())) / len(mine["final"])), rel=1e-5)
    assert overall["tokens"] > 0 and overall["by_round"][-1]["round"] == 2
    page = (tmp_path / "report.html").read_text()
    assert page.count("<svg") == 3 and page.count("<figcaption>") == 3
    assert "Content-Security-Policy" in page and "connect-src 'none'" in page  # nothing fetched when opened
    assert " src=" not in page and "<link" not in page and "@import" not in page
    embedded = page.split('id="page-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(embedded)["overall"]["correct"] == mine["correct"]  # the numbers travel with the page
    for label in ("protocol strict", "baseline", "dtype fp32", "tolerance fp32 atol=0.0001", "GPU scripted"):
        assert page.count(label) >= 3, label  # in every figure's caption
    return report


def test_six_task_suite_asks_and_evaluates_each_step_once(tmp_path: Path, kb: Path) -> None:
    faults = {("L1_Gelu", "r01.plan.1")}
    flight = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def with_a_rate_limit(step: str, role: str, body: dict[str, Any]) -> Any:
        text = " ".join(str(m.get("content", "")) for m in body["messages"])
        task = text.split("# suite-task: ", 1)[1].split()[0]
        if (task, step) in faults:
            faults.discard((task, step))
            return {"status": 429, "retry_after": 0}
        with lock:
            flight["now"] += 1
            flight["peak"] = max(flight["peak"], flight["now"])
        time.sleep(0.05)  # long enough for the other runs' requests to arrive meanwhile
        with lock:
            flight["now"] -= 1
        return responder(step, role, body)

    with ScriptedOpenAI(responder=with_a_rate_limit) as server:
        out = ks(*suite_args(tmp_path, server), "--json", env=env_for(tmp_path))
        counts = asked(server)
    assert out.exit_code == 0, out.output
    data = json_of(out)
    assert [r["state"] for r in data["runs"]] == ["finished"] * 6
    assert data["rate_limited"] == 1 and data["gpu_jobs"] == sum(evaluated(tmp_path / "evals.log").values())
    assert 2 <= flight["peak"] <= 3  # different runs' LLM steps overlapped, never more than --llm-concurrency
    assert {k: v for k, v in counts.items() if v != 1} == {("L1_Gelu", "r01.plan.1"): 2}  # the 429, retried
    assert len({task for task, _ in counts}) == 6
    evals = evaluated(tmp_path / "evals.log")
    assert evals and max(evals.values()) == 1  # every candidate of every run evaluated once
    assert {run for _, run, _ in evals} == {f"{i:03d}-L1_{i}_{n}" for i, n in enumerate(NAMES, 1)}
    check_report_against_events(tmp_path, tmp_path / "suite")

    # the same command again: everything is recorded, nothing is asked or evaluated again
    with ScriptedOpenAI(responder=responder) as server:
        again = ks(*suite_args(tmp_path, server), "--json", env=env_for(tmp_path))
        assert again.exit_code == 0 and server.requests == []
    assert evaluated(tmp_path / "evals.log") == evals
    # a suite against itself: every task a tie, the figures those of its own report
    cmp = ks("bench", "compare", str(tmp_path / "suite"), str(tmp_path / "suite"), "--json",
             "--md", str(tmp_path / "cmp.md"))
    assert cmp.exit_code == 0, cmp.output
    both = json_of(cmp)
    assert both["wins"] == {"a": 0, "b": 0, "tie": 6} and both["geomean"]["a"] == both["geomean"]["b"]
    assert "| L1/1_" in (tmp_path / "cmp.md").read_text()
    # as it stood after round 0: only the seeds count, and nothing is verified yet (verification ends a run)
    early = ks("bench", "report", str(tmp_path / "suite"), "--json", "--upto-round", "0")
    first = {t["task"]: t for t in json_of(early)["tasks"]}
    for t in first.values():
        assert t["best_round"] in (0, None) and not t["verified"] and set(t["by_round"]) <= {"0", 0}
    full = {t["task"]: t for t in json_of(ks("bench", "report", str(tmp_path / "suite"), "--json"))["tasks"]}
    assert any(full[name]["best_round"] for name in full)  # the rounds after the seed did pay somewhere
    for name, t in first.items():
        seeds = full[name]["by_round"].get("0") or full[name]["by_round"].get(0)
        assert t["speedup"] == (None if seeds is None else round(seeds, 6))


def test_kill_9_mid_suite_then_the_same_command_resumes(tmp_path: Path, kb: Path) -> None:
    env = os.environ | env_for(tmp_path) | {"KS_TEST_EVAL_SLEEP": "0.05", "PYTHONPATH": str(ROOT)}  # tests/ importable
    # a reference suite, never interrupted
    with ScriptedOpenAI(responder=responder) as server:
        assert ks(*suite_args(tmp_path, server, "reference"), env=env_for(tmp_path) | {
            "KS_TEST_EVAL_LOG": str(tmp_path / "ref.log")}).exit_code == 0
    with ScriptedOpenAI(responder=responder) as server:
        cmd = [sys.executable, "-m", "kernelskill", *suite_args(tmp_path, server)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while sum(evaluated(tmp_path / "evals.log").values()) < 12 and proc.poll() is None:
            assert time.monotonic() < deadline, "the suite made no progress"
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else "ended early"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        before = recorded(tmp_path / "suite")
        asked_before, evals_before = asked(server), evaluated(tmp_path / "evals.log")
        assert 0 < sum(len(v) for v in before.values())

        resumed = ks(*suite_args(tmp_path, server), "--json", env=env_for(tmp_path))
        assert resumed.exit_code == 0, resumed.output
        asked_after, evals_after = asked(server), evaluated(tmp_path / "evals.log")

    # nothing recorded before the kill was asked or evaluated again; only steps in flight at the kill were
    steps_of = {run.split("-", 1)[1]: steps for run, steps in before.items()}  # "L1_1_Relu" -> steps
    for (task, step), n in asked_after.items():
        if n > 1:
            run = next(k for k in steps_of if k.endswith(task.split("_", 1)[1]))
            assert (step, "llm_call") not in steps_of[run], f"{task} {step} was recorded, then asked again"
            assert asked_before[(task, step)] == 1 and n == 2
    repeated_asks = sum(n - 1 for n in asked_after.values())
    assert repeated_asks <= 3  # at most the --llm-concurrency requests in flight
    for key, n in evals_after.items():
        assert n <= 2 and (n == 1 or evals_before[key] == 1)
    # repeated: the jobs a slot had started, or had finished but whose run had not yet recorded the result,
    # when the kill came (the run records it, not the slot; under load that lags): at most one per run, as a
    # single-path run waits for its one evaluation
    assert sum(n - 1 for n in evals_after.values()) <= len(NAMES)

    # and the resumed suite ends exactly where the uninterrupted one did
    assert recompute(tmp_path / "suite")["speedups"] == recompute(tmp_path / "reference")["speedups"]
    assert {run: len(steps) for run, steps in recorded(tmp_path / "suite").items()} == {
        run: len(steps) for run, steps in recorded(tmp_path / "reference").items()}
    check_report_against_events(tmp_path, tmp_path / "suite")


def test_bad_input_is_one_failed_line_each_and_the_suite_goes_on(tmp_path: Path) -> None:
    write_level(tmp_path / "kb", 1, ["Relu", "Gelu"])
    (tmp_path / "kb" / "KernelBench" / "level1" / "3_Broken.py").write_text("import torch\nclass Model(:\n")
    with ScriptedOpenAI(responder=responder) as server:
        out = ks("bench", "run", "--kernelbench", str(tmp_path / "kb"), "--level", "1", "--level", "7",
                 "--tasks", "1-3,9", "--rounds", "1", "--home", str(tmp_path / "home"), "--suite",
                 str(tmp_path / "suite"), "--base-url", server.base_url, *PLUGINS, "--json", env=env_for(tmp_path))
    assert out.exit_code == 1, out.output
    states = {r["task"]: (r["state"], r["error"]) for r in json_of(out)["runs"]}
    assert states["L1/1_Relu"][0] == states["L1/2_Gelu"][0] == "finished"
    assert states["L1/3_Broken"][0] == "failed" and "3_Broken.py:2:" in states["L1/3_Broken"][1]
    assert states["L1/9"][0] == "failed" and "has no problem 9" in states["L1/9"][1]
    assert states["L7"][0] == "failed" and "level 7: no problems" in states["L7"][1]
    report = ks("bench", "report", str(tmp_path / "suite"))
    assert report.exit_code == 1
    lines = report.output.splitlines()
    assert len([line for line in lines if line.startswith("| L1/3_Broken | failed | no |")]) == 1
    assert len([line for line in lines if line.startswith("| L1/9 | failed | no |")]) == 1
    assert len([line for line in lines if line.startswith("| L7 | failed | no |")]) == 1
    # a malformed selection or no tasks at all is the user's error: one line, exit 2, nothing written
    bad = ks("bench", "run", "--kernelbench", str(tmp_path / "kb"), "--level", "1", "--tasks", "3-1",
             "--suite", str(tmp_path / "other"), "--home", str(tmp_path / "home"), *PLUGINS)
    assert bad.exit_code == 2 and "--tasks: '3-1' is an empty range" in bad.output
    assert not (tmp_path / "other").exists()


def test_bench_eval_measures_kernelbench_solutions(tmp_path: Path) -> None:
    from tests.test_loop_helpers import kernel

    write_level(tmp_path / "kb", 1, ["Relu", "Gelu", "Add"])
    sols = tmp_path / "solutions"
    sols.mkdir()
    (sols / "level_1_problem_1_sample_0_kernel.py").write_text(kernel("speedup=1.7", "a"))
    (sols / "level_1_problem_1_sample_1_kernel.py").write_text(kernel("status=mismatch", "b"))
    (sols / "level_1_problem_2_sample_0_kernel.py").write_bytes(b"\xff\xfe not text \x80")
    (sols / "level_1_problem_9_sample_0_kernel.py").write_text(kernel("speedup=3.0", "c"))
    (sols / "level_2_problem_1_sample_0_kernel.py").write_text(kernel("speedup=3.0", "d"))  # another level
    (sols / "notes.txt").write_text("not a solution")
    args = ["bench", "eval", str(sols), "--kernelbench", str(tmp_path / "kb"), "--level", "1", "--suite",
            str(tmp_path / "suite"), "--home", str(tmp_path / "home"), "--evaluator",
            f"{HELPERS}:CountingEvaluator", "--no-progress", "--json"]
    out = ks(*args, env=env_for(tmp_path))
    assert out.exit_code == 1, out.output
    runs = {r["task"]: r for r in json_of(out)["runs"]}
    assert runs["L1/1_Relu/s0"]["state"] == "finished" and runs["L1/1_Relu/s0"]["best_speedup"] == 1.7
    assert runs["L1/1_Relu/s1"]["state"] == "finished" and runs["L1/1_Relu/s1"]["best_speedup"] is None
    assert runs["L1/2_Gelu/s0"]["state"] == "failed" and "unreadable solution" in runs["L1/2_Gelu/s0"]["error"]
    assert runs["L1/9/s0"]["state"] == "failed" and "has no problem 9" in runs["L1/9/s0"]["error"]
    assert len(runs) == 4
    report = json_of(ks("bench", "report", str(tmp_path / "suite"), "--json"))
    rows = {t["task"]: t for t in report["tasks"]}
    assert rows["L1/1_Relu/s1"]["failure"] == "mismatch" and rows["L1/2_Gelu/s0"]["failure"] == "bad_input"
    assert report["overall"]["fast_p_eager"]["1.5"] == pytest.approx(1 / 4)
    assert ks(*args, env=env_for(tmp_path)).exit_code == 1  # again: nothing measured twice
    assert max(evaluated(tmp_path / "evals.log").values()) == 1


def test_exchange_suite_one_pending_list_answered_by_request_id(tmp_path: Path) -> None:
    write_level(tmp_path / "kb", 1, NAMES[:3])
    args = ["bench", "run", "--kernelbench", str(tmp_path / "kb"), "--level", "1", "--rounds", "1", "--llm",
            "exchange", "--home", str(tmp_path / "home"), "--suite", str(tmp_path / "suite"), *PLUGINS]
    env = env_for(tmp_path)
    trips = 0
    while True:
        out = ks(*args, env=env)
        if out.exit_code == 0:
            break
        assert out.exit_code == 3 and "bench pending" in out.output, out.output
        pending = json_of(ks("bench", "pending", str(tmp_path / "suite"), "--json"))
        assert pending and {p["side"] for p in pending} == {"llm"}
        assert len({p["run"] for p in pending}) == len(pending)  # one step per waiting run, all in one list
        for p in pending:
            run_id, step = p["request"].split(":")
            prompt = Path(p["prompt"]).read_text()
            body = {"messages": [{"role": "user", "content": prompt}]}
            answer = tmp_path / "answer.txt"
            answer.write_text(str(responder(step, p["role"], body)))
            stored = ks("bench", "answer", str(tmp_path / "suite"), p["request"], str(answer), "--by", "test agent")
            assert stored.exit_code == 0, stored.output
        trips += 1
        assert trips < 30
    report = json_of(ks("bench", "report", str(tmp_path / "suite"), "--json"))
    assert report["overall"]["correct"] == 3 and trips >= 4


def test_budget_stops_cleanly_and_the_next_start_finishes(tmp_path: Path, kb: Path) -> None:
    env = env_for(tmp_path) | {"KS_TEST_EVAL_SLEEP": "0.4"}
    with ScriptedOpenAI(responder=responder) as server:
        first = ks(*suite_args(tmp_path, server), "--budget-s", "2", "--json", env=env)
        assert first.exit_code == 3, first.output
        states = Counter(r["state"] for r in json_of(first)["runs"])
        assert states["budget"] + states["not started"] > 0
        second = ks(*suite_args(tmp_path, server), "--json", env=env_for(tmp_path))
        assert second.exit_code == 0, second.output
        counts = asked(server)
    assert max(counts.values()) == 1  # the budget stopped before steps, never in the middle of one
    assert max(evaluated(tmp_path / "evals.log").values()) == 1
    assert recompute(tmp_path / "suite")["correct"] == 6


def test_a_task_file_list_and_a_suite_started_with_other_options(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(task_source("a"))
    b.write_text(task_source("b"))
    with ScriptedOpenAI(responder=responder) as server:
        base = ["bench", "run", str(a), str(b), "--rounds", "0", "--home", str(tmp_path / "home"), "--base-url",
                server.base_url, *PLUGINS, "--suite", str(tmp_path / "s")]
        assert ks(*base, env=env_for(tmp_path)).exit_code == 0
        other = ks(*base, "--protocol", "kernelbench", env=env_for(tmp_path))
    assert other.exit_code == 2 and "started with other protocol" in other.output


def test_split_suite_carries_one_file_each_way(tmp_path: Path, kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runbook's split suite: plan here with --stop-before gpu, `bench export` ONE tar, gpu_side on the box
    (the scripted GPU stands in for the harness), ONE tar back, `bench import`, the same command again."""
    from kernelskill.pipeline.runs import gpu_side
    from tests.test_bench_helpers import CountingEvaluator

    monkeypatch.setattr(gpu_side, "HarnessGPU", lambda **kw: CountingEvaluator())
    monkeypatch.setenv("KS_TEST_EVAL_LOG", str(tmp_path / "evals.log"))
    suite = tmp_path / "suite"
    trips = 0
    with ScriptedOpenAI(responder=responder) as server:
        while True:
            out = ks(*suite_args(tmp_path, server), "--stop-before", "gpu", env=env_for(tmp_path))
            if out.exit_code == 0:
                break
            assert out.exit_code == 3, out.output
            pending = json_of(ks("bench", "pending", str(suite), "--json"))
            assert {p["side"] for p in pending} == {"gpu"} and len(pending) <= 6
            carry = tmp_path / f"carry{trips}.tar"
            assert ks("bench", "export", str(suite), "-o", str(carry)).exit_code == 0
            box, back = tmp_path / f"box{trips}", tmp_path / f"back{trips}.tar"
            assert gpu_side.main([str(box), "--import", str(carry), "--export-to", str(back)]) == 0
            assert ks("bench", "import", str(suite), str(back)).exit_code == 0
            trips += 1
            assert trips < 20
        counts = asked(server)
    assert trips >= 3 and max(counts.values()) == 1  # seed, round 1, round 2 with its re-verification ahead
    assert max(evaluated(tmp_path / "evals.log").values()) == 1
    assert recompute(suite)["correct"] == 6


def test_without_cuda_the_suite_pauses_each_run_before_its_gpu_step(tmp_path: Path) -> None:
    """Like optimize and runs resume: the local evaluator on a machine without CUDA is not an error; LLM
    steps go on, every run pauses before its first GPU step, exit code 3, and nothing was evaluated."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this checks the machine without CUDA")
    write_level(tmp_path / "kb", 1, NAMES[:2])
    with ScriptedOpenAI(responder=responder) as server:
        out = ks("bench", "run", "--kernelbench", str(tmp_path / "kb"), "--level", "1", "--rounds", "1",
                 "--home", str(tmp_path / "home"), "--suite", str(tmp_path / "suite"), "--base-url", server.base_url,
                 "--evaluator", "local", "--retriever", f"{HELPERS}:StandInRetriever", "--no-progress",
                 env=env_for(tmp_path))
    assert out.exit_code == 3, out.output
    assert "no CUDA device is visible" in out.output
    pending = json_of(ks("bench", "pending", str(tmp_path / "suite"), "--json"))
    assert len(pending) == 2 and {p["side"] for p in pending} == {"gpu"}
