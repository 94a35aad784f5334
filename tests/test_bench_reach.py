"""``bench compare``: what each arm spent (GPU seconds: evaluations and profiles; LLM calls) to reach the other
arm's final speed, per task and as the median share of the other's GPU seconds. Two real suite folders with
their runs' event logs, read through ``suite_report`` and the command line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.pipeline.bench.compare import CRITERION, compare, markdown, reach_line
from kernelskill.pipeline.bench.report import suite_report, task_row
from kernelskill.pipeline.bench.suite import Suite
from kernelskill.pipeline.bench.tasks import file_tasks
from kernelskill.pipeline.runs import RunStore, gpu_request, run_gpu_step
from tests.test_bench_gpu_seconds import SleepingProfiler
from tests.test_bench_helpers import task_source


class Log:
    """Writes a run's events as the loop does (the run's own event log)."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def llm(self, step: str, round_: int) -> None:
        self.run.log.append("llm", "llm_call", {"text": "an answer", "messages": [], "provider": "exchange"},
                            step=f"{step}.1", round_=round_)

    def eval(self, step: str, round_: int | None, speedup: float | None, worker_s: float | None,
             candidate: str | None = None) -> None:
        result = {"status": "ok" if speedup else "mismatch", "correct": bool(speedup), "speedup": speedup,
                  "candidate_ms": 1.0, "baseline_ms": speedup or 1.0,
                  "details": {} if worker_s is None else {"worker_seconds": worker_s}}
        name = step if step.startswith("verify.") else step.replace("generate", "eval").replace("optimize", "eval")
        self.run.log.append("gpu", "eval", {"candidate": candidate or f"candidates/{step}.py", "result": result},
                            step=name, round_=round_)

    def profile(self, parent: str, round_: int, worker_s: float | None) -> None:
        """A profile recorded now (through run_gpu_step, with its seconds) or, ``worker_s`` None, as one
        recorded before profiles carried seconds."""
        rel = self.run.write_candidate(parent, "x = 1\n")
        if worker_s is None:
            self.run.log.append("gpu", "profile", {"candidate": rel, "ok": True, "message": "profiled"},
                                step=f"profile.{parent}", round_=round_)
        else:
            run_gpu_step(self.run, gpu_request("profile", f"profile.{parent}", rel),
                         SleepingProfiler(sleep=0.0, worker_s=worker_s), round_=round_)


def two_arms(tmp_path: Path) -> tuple[Path, Path]:
    """``kb`` and ``none``, two tasks each.

    alpha: none 1.0 (6 s) then 2.0 (8 s): 14 s in all. kb 1.5 (5 s), a profile (30 s), 1.95 (6 s: within
    3 % of 2.0), 3.0 (5 s): kb reaches none's 2.0 at its second evaluation, 41 s and 2 calls in.
    beta: none 1.0 (5 s), 1.1 (5 s). kb 1.2 (4 s), then an old profile without seconds: reached at once.
    """
    paths = []
    for name in ("alpha", "beta"):
        (tmp_path / f"{name}.py").write_text(task_source(name))
        paths.append(tmp_path / f"{name}.py")
    suites = {}
    for arm in ("kb", "none"):
        suite = Suite.create_or_resume(tmp_path / arm, "optimize", file_tasks(paths), {"knowledge": arm})
        suites[arm] = {e["name"]: Log(suite.run_for(e, {"protocol": "kernelbench"})) for e in suite.tasks}
    a, b = suites["none"]["alpha"], suites["none"]["beta"]
    a.llm("r00.generate", 0), a.eval("r00.generate", 0, 1.0, 6.0)
    a.llm("r01.optimize", 1), a.eval("r01.optimize", 1, 2.0, 8.0)
    b.llm("r00.generate", 0), b.eval("r00.generate", 0, 1.0, 5.0)
    b.llm("r01.optimize", 1), b.eval("r01.optimize", 1, 1.1, 5.0)
    a, b = suites["kb"]["alpha"], suites["kb"]["beta"]
    a.llm("r00.generate", 0), a.eval("r00.generate", 0, 1.5, 5.0)
    a.profile("r00.generate", 1, 30.0)
    a.llm("r01.optimize", 1), a.eval("r01.optimize", 1, 1.95, 6.0)
    a.llm("r02.optimize", 2), a.eval("r02.optimize", 2, 3.0, 5.0)
    b.llm("r00.generate", 0), b.eval("r00.generate", 0, 1.2, 4.0)
    b.profile("r00.generate", 1, None)
    return tmp_path / "kb", tmp_path / "none"


def compared(kb: Path, none: Path, upto_round: int | None = None) -> dict[str, Any]:
    return compare(suite_report(Suite.open(kb), upto_round=upto_round),
                   suite_report(Suite.open(none), upto_round=upto_round))


def test_each_arm_reaches_the_others_final_speed_at_a_cost(tmp_path: Path) -> None:
    c = compared(*two_arms(tmp_path))
    alpha, beta = c["tasks"]
    assert alpha["a"]["gpu_s"] == 46.0 and alpha["a"]["profile_s"] == 30.0 and alpha["b"]["gpu_s"] == 14.0
    # kb reached none's 2.0 with its 1.95 (within 3 %): everything up to that evaluation, itself included
    assert {k: alpha["a"][k] for k in ("reached_other", "round_to_other", "gpu_s_to_other", "llm_calls_to_other",
                                       "profiles_unmeasured_to_other")} == {
        "reached_other": True, "round_to_other": 1, "gpu_s_to_other": 41.0, "llm_calls_to_other": 2,
        "profiles_unmeasured_to_other": 0}
    assert alpha["a"]["gpu_share_to_other"] == pytest.approx(41.0 / 14.0)
    # none never got near kb's 3.0
    assert alpha["b"]["reached_other"] is False and alpha["b"]["gpu_s_to_other"] is None
    assert alpha["b"]["llm_calls_to_other"] is None and alpha["b"]["gpu_share_to_other"] is None
    assert (beta["a"]["gpu_s_to_other"], beta["a"]["llm_calls_to_other"]) == (4.0, 1)
    assert beta["a"]["gpu_share_to_other"] == pytest.approx(0.4)
    assert beta["a"]["profiles_unmeasured"] == 1 and beta["a"]["profiles_unmeasured_to_other"] == 0
    ra, rb = c["reach"]["a"], c["reach"]["b"]
    assert (ra["tasks"], ra["reached"], ra["median_share"]) == (2, 2, pytest.approx((41.0 / 14.0 + 0.4) / 2, 1e-5))
    assert ra["meets_criterion"] is False and c["reach"]["criterion"] == CRITERION == 0.5
    # none reached neither: both +inf, and the median says so rather than a number
    assert (rb["tasks"], rb["reached"], rb["median_share"], rb["median_not_reached"]) == (2, 0, None, True)
    assert rb["unmeasured_profiles"] == 0 and ra["unmeasured_profiles"] == 0
    assert c["profile_s"] == {"a": 30.0, "b": 0.0} and c["profiles_unmeasured"] == {"a": 1, "b": 0}
    text = markdown(c)
    assert "| 41 s, 2 calls, 2.93 | not reached |" in text
    assert "| 4 s, 1 call, 0.40 | not reached |" in text
    assert ("A reached B's final speed on 2 of 2 tasks; median share of B's GPU seconds A needed: 1.66 "
            "(the criterion is <= 0.5).") in text
    assert "B reached A's final speed on 0 of 2 tasks; median share of A's GPU seconds B needed: not reached" in text
    assert "| ≥4 | 10 |" in text  # beta's kb total leaves out its old profile


def test_just_outside_the_tie_margin_is_not_reached(tmp_path: Path) -> None:
    """1.94 is more than 3 % below 2.0 (2.0 / 1.03 = 1.9417): not reached; 1.9417 itself is."""
    store = RunStore(tmp_path / "runs")
    (tmp_path / "t.py").write_text(task_source("t"))
    rows = []
    for i, speed in enumerate((1.94, 2.0 / 1.03, 2.0)):
        log = Log(store.create(tmp_path / "t.py", {"protocol": "kernelbench"}, run_id=f"00{i}-t"))
        log.llm("r00.generate", 0), log.eval("r00.generate", 0, speed, 3.0)
        rows.append(task_row({"name": "t", "run_id": log.run.id}, log.run))
    c = compare({"suite": "x", "tasks": [rows[0]]}, {"suite": "y", "tasks": [rows[2]]})
    assert c["tasks"][0]["a"]["reached_other"] is False and c["reach"]["a"]["median_not_reached"]
    c = compare({"suite": "x", "tasks": [rows[1]]}, {"suite": "y", "tasks": [rows[2]]})
    assert c["tasks"][0]["a"]["reached_other"] is True and c["reach"]["a"]["median_share"] == 1.0


def test_a_candidate_turned_down_by_its_re_verification_does_not_reach(tmp_path: Path) -> None:
    """As in the report's best: the 2.5 whose re-verification failed counts for neither; the arm reaches at
    the 2.1 after it, everything before (the failed re-verification's worker included) in the cost."""
    (tmp_path / "t.py").write_text(task_source("t"))
    store = RunStore(tmp_path / "runs")
    mine = Log(store.create(tmp_path / "t.py", {"protocol": "kernelbench"}, run_id="001-t"))
    mine.llm("r00.generate", 0), mine.eval("r00.generate", 0, 2.5, 3.0)
    mine.eval("verify.r00.generate", None, None, 4.0, candidate="candidates/r00.generate.py")
    mine.llm("r01.optimize", 1), mine.eval("r01.optimize", 1, 2.1, 5.0)
    other = Log(store.create(tmp_path / "t.py", {"protocol": "kernelbench"}, run_id="002-t"))
    other.llm("r00.generate", 0), other.eval("r00.generate", 0, 2.0, 10.0)
    row = task_row({"name": "t", "run_id": "001-t"}, mine.run)
    assert row["speedup"] == 2.1 and [p["speedup"] for p in row["best_path"]] == [2.1]
    c = compare({"suite": "x", "tasks": [row]},
                {"suite": "y", "tasks": [task_row({"name": "t", "run_id": "002-t"}, other.run)]})
    assert (c["tasks"][0]["a"]["gpu_s_to_other"], c["tasks"][0]["a"]["llm_calls_to_other"]) == (12.0, 2)
    assert c["tasks"][0]["a"]["gpu_share_to_other"] == 1.2


def test_upto_round_reaches_the_others_final_as_it_stood_then(tmp_path: Path) -> None:
    c = compared(*two_arms(tmp_path), upto_round=0)
    alpha, beta = c["tasks"]
    # after round 0 none's final on alpha is 1.0 (6 s); kb's 1.5 got there at once; the round-1 profile is out
    assert alpha["b"]["speedup"] == 1.0 and alpha["b"]["gpu_s"] == 6.0 and alpha["a"]["profile_s"] == 0.0
    assert (alpha["a"]["gpu_s_to_other"], alpha["a"]["llm_calls_to_other"], alpha["a"]["round_to_other"]) == (
        5.0, 1, 0)
    assert alpha["a"]["gpu_share_to_other"] == pytest.approx(5.0 / 6.0)
    assert alpha["b"]["reached_other"] is False  # 1.0 against kb's 1.5
    assert beta["a"]["gpu_share_to_other"] == pytest.approx(0.8) and beta["a"]["profiles_unmeasured"] == 0
    assert c["reach"]["a"]["median_share"] == pytest.approx((5.0 / 6.0 + 0.8) / 2, 1e-5)


def test_the_other_arms_gpu_seconds_unknown_leaves_the_task_out_of_the_median(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(task_source("t"))
    store = RunStore(tmp_path / "runs")
    mine = Log(store.create(tmp_path / "t.py", {"protocol": "kernelbench"}, run_id="001-t"))
    mine.llm("r00.generate", 0), mine.eval("r00.generate", 0, 2.0, 3.0)
    other = Log(store.create(tmp_path / "t.py", {"protocol": "kernelbench"}, run_id="002-t"))
    other.llm("r00.generate", 0), other.eval("r00.generate", 0, 1.5, None)  # a result from before worker seconds
    c = compare({"suite": "x", "tasks": [task_row({"name": "t", "run_id": "001-t"}, mine.run)]},
                {"suite": "y", "tasks": [task_row({"name": "t", "run_id": "002-t"}, other.run)]})
    side = c["tasks"][0]["a"]
    assert side["reached_other"] is True and side["gpu_s_to_other"] == 3.0 and side["gpu_share_to_other"] is None
    r = c["reach"]["a"]
    assert (r["tasks"], r["reached"], r["shares"], r["other_gpu_s_unknown"], r["median_share"]) == (1, 1, 0, 1, None)
    assert "1 task(s) left out of the median: B's GPU seconds unknown" in reach_line(c, "a")


def test_the_command_prints_and_writes_the_reach(tmp_path: Path) -> None:
    kb, none = two_arms(tmp_path)
    home = ["--home", str(tmp_path / "home")]
    out = CliRunner().invoke(main, ["bench", "compare", str(kb), str(none), "--json", *home])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)  # strict JSON: the +inf of a median not reached is not in it
    assert data["reach"]["b"]["median_share"] is None and data["reach"]["b"]["median_not_reached"] is True
    assert data["tasks"][0]["a"]["gpu_s_to_other"] == 41.0 and data["tasks"][0]["a"]["eval_s"] == 16.0
    assert math.isclose(data["reach"]["a"]["median_share"], (41.0 / 14.0 + 0.4) / 2, rel_tol=1e-5)
    md = tmp_path / "out" / "compare.md"
    out = CliRunner().invoke(main, ["bench", "compare", str(kb), str(none), "--md", str(md), "--upto-round", "0",
                                    *home])
    assert out.exit_code == 0, out.output
    assert "A reached B's final speed on 2 of 2 tasks; median share of B's GPU seconds A needed: 0.82" in out.output
    assert md.read_text() in out.output + "\n"
