"""The GPU side of a split suite: each result recorded the moment it is measured (through the GPU pool of
``HarnessGPU.evaluate_many``), ``--budget-s``, and ``--export-to FILE.tar`` packing every run into ONE file
that ``--import`` and ``bench import`` take back; on a bare box with the real harness (CPU mode here)."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from kernelskill.pipeline.runs import RunStore, gpu_pool, gpu_request, gpu_side
from kernelskill.pipeline.runs.portable import export_runs, import_runs, is_bundle
from tests.test_loop_helpers import ADD_CANDIDATE, ADD_TASK, kernel


def paused_runs(root: Path, n: int, candidate: str | None = None) -> list[Any]:
    """``n`` runs paused before their seed's evaluation, as the planning side leaves them."""
    task = root / "add.py"
    root.mkdir(parents=True, exist_ok=True)
    task.write_text(ADD_TASK)
    store = RunStore(root / "runs")
    runs = []
    for i in range(n):
        run = store.create(task, {"model": "m", "options": {}, "harness": {"timing_trials": 5,
                                                                           "correctness_trials": 1}},
                           run_id=f"{i:03d}-add")
        source = f"{candidate}\n# run {i}\n" if candidate else kernel(f"speedup={1.5 + i / 10:.1f}", str(i))
        rel = run.write_candidate("r00.generate", source)  # distinct files: identical jobs are measured once
        run.log.append("loop", "run_paused", {"before": "r00.eval", "side": "gpu",
                                              "request": gpu_request("eval", "r00.eval", rel) | {"round": 0}})
        runs.append(run)
    return runs


def on_disk(run_dir: Path) -> list[dict[str, Any]]:
    """The run's events as the file holds them now (not the writer's memory)."""
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


class ScriptedBackend:
    """Stands in for the harness behind the pool (no GPU here); checks, before measuring each job, that every
    job measured before it is already in its run's log on disk."""

    name = "scripted"
    measured: list[Path] = []
    sleep = 0.0

    def __init__(self, config: Any, gpus: Any = None) -> None:
        ScriptedBackend.measured = []

    def slots(self) -> list[Any]:
        return [0]

    def prepare(self, job: Any) -> None:
        return None

    def run(self, job: Any, slot: Any) -> dict[str, Any]:
        for earlier in ScriptedBackend.measured:
            assert any(e["type"] == "eval" for e in on_disk(earlier)), earlier
        time.sleep(self.sleep)
        ScriptedBackend.measured.append(job.run_dir)
        speed = float(job.candidate.read_text().split("speedup=")[1].split()[0])
        return {"status": "ok", "correct": True, "speedup": speed, "candidate_ms": 1.0, "baseline_ms": speed,
                "details": {"gpu_name": "scripted"}}


def test_each_result_is_recorded_the_moment_it_is_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_pool, "HarnessBackend", ScriptedBackend)
    runs = paused_runs(tmp_path, 4)
    gpu = gpu_side.HarnessGPU(allow_cpu=True)
    rows = gpu_side.evaluate_pending(runs, gpu, profile_ahead=False)
    assert sorted(r["status"] for r in rows) == ["ok"] * 4
    assert len(ScriptedBackend.measured) == 4
    [phase] = gpu.phases  # the batch's summary: what a trip reports as the GPU busy share
    assert phase["evaluations"] == 4 and phase["gpus"] >= 1
    assert 0 < phase["busy_share_with_builds"] <= phase["busy_share"] <= 1
    assert phase["busy_gpu_s"] >= 4 * ScriptedBackend.sleep
    assert "4 evaluations" in gpu_side.phase_line(phase)
    for run in runs:
        [event] = [e for e in on_disk(run.path) if e["type"] == "eval"]
        assert event["step"] == "r00.eval" and event["data"]["result"]["details"]["gpu_name"] == "scripted"


def test_budget_leaves_the_rest_pending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_pool, "HarnessBackend", ScriptedBackend)
    monkeypatch.setattr(gpu_side, "EVAL_ESTIMATE_S", 0.0)
    monkeypatch.setattr(ScriptedBackend, "sleep", 0.4)
    runs = paused_runs(tmp_path, 6)
    rows = gpu_side.evaluate_pending(runs, gpu_side.HarnessGPU(allow_cpu=True), deadline=time.monotonic() + 1.0)
    done = [r for r in rows if r["status"] == "ok"]
    left = [r for r in rows if r["status"] == gpu_side.NOT_STARTED]
    assert done and left and len(done) + len(left) == 6
    for run in runs:  # measured ones are recorded; the others still wait for the same step
        recorded = any(e["type"] == "eval" for e in on_disk(run.path))
        assert recorded == (run.id in {r["run"] for r in done})
    assert {s.run.id for s in gpu_side.pending_gpu_steps(gpu_side.find_runs(tmp_path / "runs"))} == {
        r["run"] for r in left}


class _Scripted:
    """gpu_side's evaluator stand-in for main(): the loop's seam, no batch entry point."""

    def __init__(self, **kw: Any) -> None:
        pass

    def check(self) -> None:
        return None

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        return {"status": "ok", "correct": True, "speedup": 1.5, "candidate_ms": 1.0, "baseline_ms": 1.5}

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        return {"ok": False, "message": "no ncu", "csv": ""}


def test_export_to_one_file_and_import_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = paused_runs(tmp_path / "here", 3)
    carry, _ = export_runs([r.path for r in here], tmp_path / "carry.tar")
    assert is_bundle(carry) and not is_bundle(tmp_path / "here" / "add.py")
    monkeypatch.setattr(gpu_side, "HarnessGPU", _Scripted)
    box = tmp_path / "box" / "runs"
    back = tmp_path / "out" / "back.tar"
    assert gpu_side.main([str(box), "--import", str(carry), "--export-to", str(back), "--no-profile-ahead"]) == 0
    with tarfile.open(back) as tar:  # ONE file, one archive per run inside
        assert sorted(m.name for m in tar.getmembers()) == [f"{r.id}.kernelskill-run.tar.gz" for r in here]
    paths = import_runs(back, tmp_path / "here" / "runs", replace=True)
    assert [p.name for p in paths] == [r.id for r in here]
    for run in here:
        assert [e["type"] for e in on_disk(run.path)][-1] == "eval"
    # the same bundle compressed as a whole (how the published suite results are kept) reads the same
    packed = tmp_path / "out" / "back.tar.gz"
    with open(back, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert is_bundle(packed) and not is_bundle(tmp_path / "here" / "runs" / here[0].id / "events.jsonl")
    again = import_runs(packed, tmp_path / "again" / "runs", replace=True)
    assert [p.name for p in again] == [r.id for r in here]
    # a bundle member that is not a run archive is refused whole
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as tar:
        tar.add(tmp_path / "here" / "add.py", arcname="../add.py")
    with pytest.raises(Exception, match="not a run archive"):
        import_runs(bad, tmp_path / "elsewhere")


def test_two_suites_with_the_same_run_ids_go_in_one_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two suites (an arm and its ablation) share run ids; each DIR gets its own bundle in and out."""
    arms = {name: paused_runs(tmp_path / name, 2) for name in ("kb", "none")}
    carries = [export_runs([r.path for r in arms[name]], tmp_path / f"{name}.tar")[0] for name in arms]
    monkeypatch.setattr(gpu_side, "HarnessGPU", _Scripted)
    boxes = [tmp_path / "box" / name for name in arms]
    backs = [tmp_path / "out" / f"{name}-back.tar" for name in arms]
    argv = [*map(str, boxes), "--import", *map(str, carries), "--export-to", *map(str, backs),
            "--no-profile-ahead", "--no-verify-ahead"]
    assert gpu_side.main(argv) == 0
    for name, back in zip(arms, backs, strict=True):
        paths = import_runs(back, tmp_path / name / "runs", replace=True)
        assert [p.name for p in paths] == ["000-add", "001-add"]
        for run in arms[name]:
            assert [e["type"] for e in on_disk(run.path)][-1] == "eval"
    assert gpu_side.main([*map(str, boxes), "--import", str(carries[0])]) == 2  # one bundle per DIR


class _Counting(_Scripted):
    calls: list[str] = []

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        self.calls.append(Path(candidate).read_text())
        return super().evaluate(task, candidate, seed=seed)


def test_identical_jobs_of_two_arms_are_measured_once_and_recorded_in_both(tmp_path: Path) -> None:
    """An arm and its ablation start from the same seed file: one measurement, the same result in each run;
    a different candidate (or another harness setting) is measured on its own."""
    arms = {name: paused_runs(tmp_path / name, 2) for name in ("kb", "none")}  # 000 and 001 differ per run
    _Counting.calls = []
    rows = gpu_side.evaluate_pending([r for runs in arms.values() for r in runs], _Counting(), profile_ahead=False)
    assert len(rows) == 4 and len(_Counting.calls) == 2
    for a, b in zip(arms["kb"], arms["none"], strict=True):
        ea, eb = (RunStore(r.path.parent).open(r.id).log.find("r00.eval", "eval") for r in (a, b))
        assert ea["data"]["result"] == eb["data"]["result"]
    other = paused_runs(tmp_path / "other", 1)
    manifest = other[0].path / "run.json"
    manifest.write_text(manifest.read_text().replace('"timing_trials": 5', '"timing_trials": 7'))
    _Counting.calls = []
    gpu_side.evaluate_pending([*paused_runs(tmp_path / "again", 1), *RunStore(tmp_path / "other" / "runs").list()],
                              _Counting(), profile_ahead=False)
    assert len(_Counting.calls) == 2  # same files, other harness settings: two measurements


@pytest.mark.slow
def test_bare_box_budget_and_one_file_with_the_real_harness(tmp_path: Path) -> None:
    """On a box with only torch and the standard library: the real harness (CPU mode) through the pool."""
    from tests.test_split_gpu_side import bare_box

    here = paused_runs(tmp_path / "here", 2, candidate=ADD_CANDIDATE)
    carry, _ = export_runs([r.path for r in here], tmp_path / "carry.tar")
    box = tmp_path / "box"
    done = bare_box(str(box / "runs"), "--import", str(carry), "--export-to", str(box / "back.tar"), "--allow-cpu",
                    "--budget-s", "600", "--json", "--no-profile-ahead", cwd=box)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LOADED []" in done.stderr
    rows = json.loads(done.stdout)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    import_runs(box / "back.tar", tmp_path / "here" / "runs", replace=True)
    for run in here:
        [event] = [e for e in on_disk(run.path) if e["type"] == "eval"]
        assert event["data"]["result"]["correct"] and event["data"]["result"]["details"]["gpu_name"] == "cpu"


@pytest.mark.slow
def test_sigterm_mid_batch_keeps_what_was_measured_and_still_exports(tmp_path: Path) -> None:
    """The failure this guards against: a device call cut off half-way recorded nothing and carried nothing back.
    Here gpu_side (a bare box, the real harness in CPU mode) gets SIGTERM once its first result is recorded."""
    import os
    import signal
    import subprocess
    import sys

    from tests.test_split_gpu_side import BARE_BOX

    here = paused_runs(tmp_path / "here", 4, candidate=ADD_CANDIDATE)
    carry, _ = export_runs([r.path for r in here], tmp_path / "carry.tar")
    box = tmp_path / "box"
    box.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", BARE_BOX, str(box / "runs"), "--import", str(carry), "--export-to",
                             str(box / "back.tar"), "--allow-cpu", "--build-jobs", "1", "--no-profile-ahead"],
                            env={"PATH": "/usr/bin:/bin", "HOME": str(box)}, cwd=box, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        logs = list((box / "runs").glob("*/events.jsonl"))
        if any('"kind": "gpu"' in f.read_text() for f in logs):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert (box / "back.tar").is_file(), err[-3000:]
    paths = import_runs(box / "back.tar", tmp_path / "here" / "runs", replace=True)
    measured = [p for p in paths if any(e["type"] == "eval" for e in on_disk(p))]
    assert len(paths) == 4 and len(measured) >= 1, err[-3000:]
    if proc.returncode != 0:  # stopped by the signal (else the batch had just finished): the rest stays pending
        assert proc.returncode == 128 + signal.SIGTERM
        pending = gpu_side.pending_gpu_steps(gpu_side.find_runs(tmp_path / "here" / "runs"))
        assert {s.run.id for s in pending} == {p.name for p in paths} - {p.name for p in measured}


def _one_run(tmp_path: Path, **options: Any) -> Any:
    """One paused run whose manifest has just these loop options (rounds, verify seed)."""
    [run] = paused_runs(tmp_path, 1)
    manifest = run.path / "run.json"
    data = json.loads(manifest.read_text())
    data["options"] = options
    manifest.write_text(json.dumps(data))
    return RunStore(run.path.parent).open(run.id)


def test_verify_ahead_skips_what_the_loop_turned_down(tmp_path: Path) -> None:
    """The last round measured correct: re-verify the fastest candidate the loop has not rejected (a faster
    seed that the reviewer turned down is not the one the loop will rank first)."""
    run = _one_run(tmp_path, rounds=1, verify_seed=7)

    def evaluated(step: str, candidate: str, speedup: float) -> None:
        run.log.append("gpu", "eval", {"candidate": candidate, "result": {"correct": True, "speedup": speedup}},
                       step=step)

    evaluated("r00.eval", "candidates/r00.generate.py", 2.0)
    run.log.append("loop", "attempt", {"candidate": "candidates/r00.generate.py", "accepted": False}, step="r00")
    assert gpu_side.verify_ahead_requests(run) == []  # round 1 not measured yet
    evaluated("r01.eval", "candidates/r01.optimize.py", 1.5)
    [request] = gpu_side.verify_ahead_requests(run)
    assert request["step"] == "verify.r01.optimize" and request["seed"] == 7


def test_verify_ahead_also_verifies_the_runner_up_of_an_unreviewed_last_candidate(tmp_path: Path) -> None:
    """The last round's candidate is the fastest but not reviewed yet: should the review turn it down, the
    loop verifies the best accepted one instead, so both are verified on the same trip."""
    run = _one_run(tmp_path, rounds=2, verify_seed=7)
    for step, candidate, speedup, accepted in (("r00.eval", "candidates/r00.generate.py", 1.0, True),
                                               ("r01.eval", "candidates/r01.optimize.py", 1.4, True),
                                               ("r02.eval", "candidates/r02.optimize.py", 1.9, None)):
        run.log.append("gpu", "eval", {"candidate": candidate, "result": {"correct": True, "speedup": speedup}},
                       step=step)
        if accepted is not None:
            run.log.append("loop", "attempt", {"candidate": candidate, "accepted": accepted}, step=step[:3])
    steps = [r["step"] for r in gpu_side.verify_ahead_requests(run)]
    assert steps == ["verify.r02.optimize", "verify.r01.optimize"]
    run.log.append("loop", "attempt", {"candidate": "candidates/r02.optimize.py", "accepted": True}, step="r02")
    run.log.append("gpu", "eval", {"candidate": "candidates/r02.optimize.py", "result": {"correct": True}},
                   step="verify.r02.optimize")
    assert gpu_side.verify_ahead_requests(run) == []  # reviewed and verified: nothing more ahead


def test_profile_ahead_of_a_search_covers_every_new_frontier_member(tmp_path: Path) -> None:
    """A search plans from each of its F fastest correct candidates: one that ranks second is profiled on
    the same trip (a single path would profile only a candidate faster than every accepted one)."""
    run = _one_run(tmp_path, rounds=3, candidates_per_round=4, frontier=2)

    def evaluated(step: str, speedup: float | None) -> dict[str, Any]:
        cand = f"candidates/{step.replace('eval', 'optimize')}.py"
        result = {"correct": speedup is not None, "speedup": speedup}
        return run.log.append("gpu", "eval", {"candidate": cand, "result": result}, step=step)

    for step, speedup in (("r01.eval.k1", 1.5), ("r01.eval.k2", 1.2)):
        evaluated(step, speedup)
        run.log.append("loop", "attempt", {"candidate": f"candidates/{step}.py", "accepted": True}, step="r01")
    ahead = {}
    for step, speedup in (("r02.eval.k1", 1.3), ("r02.eval.k2", 1.1), ("r02.eval.k3", None), ("r02.eval.k4", 1.6)):
        event = evaluated(step, speedup)
        request = {"type": "eval", "step": step, "candidate": event["data"]["candidate"]}
        ahead[step] = gpu_side.profile_ahead_request(run, request, event)
    assert ahead["r02.eval.k1"]["step"] == "profile.r02.optimize.k1"  # second of the frontier when recorded
    assert ahead["r02.eval.k2"] is None and ahead["r02.eval.k3"] is None  # slower than the second; broken
    assert ahead["r02.eval.k4"]["step"] == "profile.r02.optimize.k4"
    last = evaluated("r03.eval.k1", 2.0)
    assert gpu_side.profile_ahead_request(run, {"type": "eval", "step": "r03.eval.k1",
                                                "candidate": last["data"]["candidate"]}, last) is None


def _paused_before_profile(run: Any) -> None:
    rel = "candidates/r00.generate.py"
    run.log.append("gpu", "eval", {"candidate": rel, "result": {"status": "ok", "correct": True, "speedup": 1.5}},
                   step="r00.eval", round_=0)
    request = gpu_request("profile", "profile.r00.generate", rel)
    run.log.append("loop", "run_paused", {"before": request["step"], "side": "gpu", "request": request})


def test_skip_profiles_records_them_as_not_taken_and_evaluates_the_rest(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A trip with device time for the evaluations only: every pending profile is recorded as not taken (the
    loop's next query is static-only), the evaluations run, and nothing is profiled ahead."""
    profiled, evaluated = paused_runs(tmp_path, 2)
    _paused_before_profile(profiled)
    monkeypatch.setattr(gpu_side, "HarnessGPU", _Scripted)
    assert gpu_side.main([str(tmp_path / "runs"), "--skip-profiles"]) == 0
    skipped = [e for e in on_disk(profiled.path) if e["type"] == "profile"]
    assert len(skipped) == 1 and skipped[0]["step"] == "profile.r00.generate"
    assert skipped[0]["data"]["ok"] is False and skipped[0]["data"]["message"] == gpu_side.SKIPPED_PROFILE
    events = on_disk(evaluated.path)
    assert [e["data"]["result"]["status"] for e in events if e["type"] == "eval"] == ["ok"]
    assert not [e for e in events if e["type"] == "profile"]  # the new parent is not profiled ahead either


def test_skip_profiles_needs_no_cuda_when_only_profiles_are_pending(tmp_path: Path) -> None:
    run = paused_runs(tmp_path, 1)[0]
    _paused_before_profile(run)
    assert gpu_side.main([str(tmp_path / "runs"), "--skip-profiles"]) == 0  # the real HarnessGPU, no check
    assert [e["data"]["message"] for e in on_disk(run.path) if e["type"] == "profile"] == [gpu_side.SKIPPED_PROFILE]
