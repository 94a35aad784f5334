"""Issue 27: a candidate can neither forge its verdict, nor change what judges it, nor reach a secret or a
host socket (CPU: real workers in the real sandbox, pure-PyTorch candidates on the CPU device).

The attacks are the ones that once worked (numbered as in the issue): 1 appending to the package,
2 a result.json plus os._exit(0), 3 writing the starting folder's and the --home's kernelskill.toml,
4 reading .env and the --home's toml, 5 writing /etc, /opt, /srv, /usr/local and connecting to a Unix
socket outside, 6 a tampered build-cache entry, 11 CUDA_PASSPHRASE in the environment, 12 the profile
worker's isolation. tests/test_sandbox_gpu.py runs the same attacks on a GPU.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelskill.pipeline.harness import EvalConfig, build, channel, isolation
from kernelskill.pipeline.harness.preflight import WeakIsolation, require_isolation
from kernelskill.pipeline.harness.sandbox import scrub_env
from tests.sandbox_attacks import (
    ADD,
    CASES,
    EVALUATE_MANY,
    FAKE_NCU,
    PROFILE_ONE,
    SECRETS,
    World,
    denied,
    findings,
    forging_candidate,
    run_script,
    sampled_misbehaviours,
    world_for,
)

NAMESPACED = isolation.available() == isolation.NAMESPACES
needs_namespaces = pytest.mark.skipif(not NAMESPACED, reason="user namespaces are not available here: "
                                      "the attacks would reach the host (process-only isolation)")

FIXED_FORGERIES = {
    "forge_file_exit": (["result_file"], "exit0", False),  # failure 2 as reported
    "forge_file_at_import_correct": (["result_tmp"], "return_correct", True),
    "forge_print_exit": (["print_result", "print_record"], "exit0", False),
    "forge_pipes_exit": (["write_pipes"], "exit0", False),
    "forge_pipes_correct": (["write_pipes"], "return_correct", False),
    "kill_self": ([], "sigkill", False),
    "exit_early": ([], "exit0", False),
    "close_channel_correct": ([], "close_fds_return", False),
}
SAMPLED = sampled_misbehaviours(8)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    yield from world_for(tmp_path_factory.mktemp("sandbox-world"))


def _run(script: str, spec: dict, world: World, **env: str) -> object:
    return run_script(script, spec, world, timeout=900, **env)


@pytest.fixture(scope="module")
def results(world):
    if not NAMESPACED:
        pytest.skip("user namespaces are not available here")
    jobs = [("probe", str(world.probe()))]
    for name, (actions, ending, at_import) in FIXED_FORGERIES.items():
        jobs.append((name, str(world.write(f"{name}.py", forging_candidate(actions, ending, at_import=at_import)))))
    for name, actions, ending, at_import in SAMPLED:
        jobs.append((name, str(world.write(f"{name}.py", forging_candidate(actions, ending, at_import=at_import)))))
    jobs.append(("honest", str(CASES / "cpu" / "good_add.py")))
    out = _run(EVALUATE_MANY, {"task": str(ADD), "cache": str(world.cache), "home": str(world.home), "jobs": jobs,
                               "gpus": [], "slots": 2, "time": True}, world)
    return {r["details"]["tag"]: r for r in out}


# ---- 1, 3, 4, 5, 11: the probe --------------------------------------------------------------------
@needs_namespaces
def test_probe_changes_nothing_it_judged_by_and_reads_no_secret(world, results):
    res = results["probe"]
    assert res["status"] == "runtime_error" and res["details"]["isolation"] == "namespaces", res["message"]
    found = findings(res["message"])
    no = denied(res["details"])
    # 1: the package that judges it (and would run as the user next time) is read-only
    assert found["write"]["package_init"] in no and found["write"]["package_module"] in no, found
    # the world is read-only for the sandbox's own user too: a host folder that user may write takes no plant
    assert found["write"]["own_plant"] == "EROFS", found
    # 3: the starting folder's settings are hidden, the --home folder is not there at all
    assert found["write"]["cwd_toml"] in ("EROFS", "EACCES"), found
    assert found["write"]["home_toml"] in (*no, "ENOENT") and found["write"]["home_plant"] in (*no, "ENOENT")
    # 4: .env, .env.local and both settings files read as nothing (hidden) or not at all
    assert all(v != "secret" for v in found["read"].values()), found
    # 5: as root too, nothing of the host is writable; a Unix socket outside is out of reach
    for key, value in found["write"].items():
        if key in world.host_targets:
            assert value in (*no, "ENOENT"), (key, value)
    assert found["unix"] == "socket:EPERM" and found["socketpair"] == "x", found
    assert not world.accepted()
    # 11: the environment filter is an allowlist: CUDA_PASSPHRASE and the API key never arrive
    assert found["env"] == [], found
    # the cache: no worker writes a record, nor plants a file in the cache root
    assert all(v in (*no, "ENOENT") for v in found["cache"].values()), found
    assert world.unchanged()


# ---- as root: the sandbox's root is an unprivileged uid on the host --------------------------------
AS_ROOT = os.geteuid() == 0


@needs_namespaces
def test_as_root_a_candidate_reads_no_root_only_file(results):
    """Run as root, kernelskill maps the sandbox's root to uid 65534: a file only root may read (mode 0600,
    outside every hidden and scratch folder, so the sandbox shows it) stays unreadable, /etc/shadow too."""
    if not AS_ROOT:
        pytest.skip("the suite does not run as root: the sandbox's root is the caller's own uid")
    res = results["probe"]
    assert res["details"]["sandbox_identity"].startswith(f"unprivileged (uid {isolation.outer_id()} "), res["details"]
    found = findings(res["message"])
    assert found["read"]["root_only"] == "unreadable:EACCES", found["read"]
    if os.path.exists("/etc/shadow"):
        assert found["read"]["shadow"] == "unreadable:EACCES", found["read"]


@needs_namespaces
def test_the_sandbox_s_root_is_root_inside_and_its_files_are_the_mapped_uid_s(world):
    """Inside, the candidate is uid 0 (of its own user namespace); what it writes in its work folder belongs,
    on the host, to the uid its root is mapped to: 65534 when kernelskill runs as root, else the caller."""
    probe = world.probe("probe_owner.py")
    out = _run(EVALUATE_MANY, {"task": str(ADD), "cache": str(world.cache), "home": str(world.home),
                               "jobs": [("owner", str(probe))], "gpus": [], "slots": 1, "keep_workdir": True}, world)
    res = out[0]
    found = findings(res["message"])
    work = Path(found["cwd"])
    try:
        assert found["uid"] == [0, 0] and found["work_file"] == "written", found
        owner = isolation.outer_id() if AS_ROOT else os.geteuid()
        st = (work / "ks-owner-probe.txt").stat()
        assert (st.st_uid, st.st_gid) == (owner, owner if AS_ROOT else os.getegid()), (st.st_uid, st.st_gid)
        assert work.name.startswith("ks-worker-") and world.unchanged()
    finally:
        if work.name.startswith("ks-worker-"):
            shutil.rmtree(work, ignore_errors=True)


@needs_namespaces
def test_the_honest_candidate_still_passes(results):
    res = results["honest"]
    assert res["status"] == "ok" and res["correct"] and res["speedup"] > 0, res["message"]
    assert res["details"]["isolation"] == "namespaces"
    if os.geteuid() == 0:  # an honest candidate still passes as the unprivileged uid
        assert res["details"]["sandbox_identity"].startswith("unprivileged"), res["details"]


# ---- 2: the verdict comes from the channel only ---------------------------------------------------
@needs_namespaces
@pytest.mark.parametrize("name", list(FIXED_FORGERIES))
def test_a_forged_or_missing_verdict_never_passes(results, name):
    res = results[name]
    assert res["status"] != "ok", (name, res["message"])
    actions, ending, _at_import = FIXED_FORGERIES[name]
    if actions:  # a forgery found is the candidate's cheat, whatever else happened
        assert res["status"] == "cheat" and res["details"]["cheat_check"] == "forged_result", (name, res["message"])
    else:
        assert res["status"] == "runtime_error", (name, res["message"])


@needs_namespaces
@pytest.mark.parametrize("sample", SAMPLED, ids=[s[0] for s in SAMPLED])
def test_property_no_misbehaviour_gets_ok(results, sample):
    """Sampled: files written, records printed or pushed into every pipe, at import or in forward, then
    an exit, a signal or a correct return: never ``ok``."""
    name, actions, ending, at_import = sample
    res = results[name]
    assert res["status"] != "ok", (actions, ending, at_import, res["message"])
    if any(a in ("result_file", "result_tmp", "print_result", "print_record") for a in actions) \
            and ending not in ("sigkill", "sigterm"):
        assert res["status"] == "cheat", (actions, ending, res["message"])


def _record(stages: list[str], result: dict, nonce: str, *, stream: bool = True) -> bytes:
    """What the worker's writer puts on the channel (``stream=False``: the record alone, without stage lines)."""
    r, w = os.pipe()
    writer = channel.Writer(w, nonce)
    if stream:
        for s in stages:
            writer.stage(s)
    else:
        writer.stages = list(stages)
    writer.record(result)
    data = os.read(r, 1 << 20)
    os.close(r)
    return data


NONCE = "a" * 32
STAGES = ["load_task", "import_candidate", "first_forward", "correctness_trial_0", "timing"]
OK_CONFIG = {"correctness_trials": 1, "time": True}


def test_channel_accepts_the_harness_record():
    reading = channel.read(_record(STAGES, {"status": "ok"}, NONCE), NONCE, mode="evaluate", config=OK_CONFIG)
    assert reading.result == {"status": "ok"} and not reading.forged and reading.stages == STAGES


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_property_arbitrary_bytes_are_never_a_verdict(data):
    assert channel.read(data, NONCE, mode="evaluate", config=OK_CONFIG).result is None


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789abcdef", min_size=32, max_size=32).filter(lambda n: n != NONCE),
       st.lists(st.sampled_from(STAGES + ["determinism", "x"]), max_size=8), st.binary(max_size=64))
def test_property_forged_records_are_refused(other, stages, tail):
    good = _record(STAGES, {"status": "ok"}, NONCE)
    assert channel.read(_record(STAGES, {"status": "ok"}, other), NONCE, mode="evaluate", config=OK_CONFIG).forged
    if tail:  # anything after the record: a second record, a stage, garbage
        assert channel.read(good + tail, NONCE, mode="evaluate", config=OK_CONFIG).result is None
    # a record whose stage list is not the streamed one, or a pass without its deciding stages
    lying = _record(stages, {"status": "ok"}, NONCE)
    if stages != STAGES:
        head = b"".join(b"S " + s.encode() + b"\n" for s in STAGES)
        record_only = _record(stages, {"status": "ok"}, NONCE, stream=False)
        assert channel.read(head + record_only, NONCE, mode="evaluate", config=OK_CONFIG).forged
    if not {"import_candidate", "first_forward", "correctness_trial_0", "timing"} <= set(stages):
        assert channel.read(lying, NONCE, mode="evaluate", config=OK_CONFIG).result is None


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_property_a_cut_off_record_is_a_death_not_a_verdict(data):
    good = _record(STAGES, {"status": "ok"}, NONCE)
    cut = data.draw(st.integers(0, len(good) - 1))
    reading = channel.read(good[:cut], NONCE, mode="evaluate", config=OK_CONFIG)
    assert reading.result is None and not reading.forged and reading.problem


# ---- 3, 4 through the CLI's --home -----------------------------------------------------------------
@needs_namespaces
def test_cli_eval_hides_the_home_and_the_starting_folders_settings(world):
    probe = world.probe("probe_cli.py")
    proc = subprocess.run([sys.executable, "-m", "kernelskill", "--home", str(world.home), "eval", str(ADD), str(probe),
                           "--json", "--trials", "3"], cwd=world.project, env=world.env(), capture_output=True,
                          text=True, timeout=600)
    res = json.loads(proc.stdout)["result"]
    found = findings(res["message"])
    assert found["write"]["home_toml"] in ("EROFS", "ENOENT") and found["read"]["home_toml"] != "secret", found
    assert found["write"]["cwd_toml"] in ("EROFS", "EACCES") and found["read"]["cwd_toml"] != "secret", found
    assert all(v != "secret" for v in found["read"].values())
    assert world.unchanged()


# ---- 6: the build cache --------------------------------------------------------------------------
def test_a_tampered_build_record_is_rebuilt_never_a_traceback(tmp_path):
    cfg = EvalConfig(cache_dir=str(tmp_path))
    first = build(CASES / "cpu" / "good_add.py", cfg)
    record = tmp_path / first.key / "build.json"
    assert first.ok and not first.cached and json.loads(record.read_text())["sha256"]
    assert build(CASES / "cpu" / "good_add.py", cfg).cached
    for forged in ("{not json", '{"ok": true, "status": "ok", "message": "forged"}', "",
                   json.dumps({"record": {"ok": True}, "files": {}, "sha256": "0" * 64})):
        record.write_text(forged)
        again = build(CASES / "cpu" / "good_add.py", cfg)
        assert again.ok and not again.cached and again.message == first.message, forged
        assert json.loads(record.read_text())["record"]["message"] == first.message


def test_a_tampered_build_file_is_rebuilt(tmp_path):
    """A built entry (nvcc -cubin in a build worker): changing one of its files makes the record invalid."""
    cfg = EvalConfig(cache_dir=str(tmp_path), prebuild_fastpath=True)
    first = build(CASES / "gpu" / "good_add_fastpath.py", cfg)
    assert first.ok and not first.cached, first.log
    cubins = list((tmp_path / first.key / "cubin").glob("*.cubin"))
    assert cubins and build(CASES / "gpu" / "good_add_fastpath.py", cfg).cached
    cubins[0].write_bytes(b"planted")
    again = build(CASES / "gpu" / "good_add_fastpath.py", cfg)
    assert again.ok and not again.cached, again.log
    assert cubins[0].read_bytes() != b"planted" and build(CASES / "gpu" / "good_add_fastpath.py", cfg).cached


# ---- 11: the environment filter -------------------------------------------------------------------
def test_environment_filter_is_an_allowlist():
    env = scrub_env({"PATH": "/bin", "CUDA_HOME": "/usr/local/cuda", "CUDA_VISIBLE_DEVICES": "0",
                     "CUDA_PASSPHRASE": "p", "CUDA_SOMETHING": "s", "NVCC_APPEND_FLAGS": "-g", "NVCC_TOKEN": "t",
                     "KERNELSKILL_HARNESS_DEVICE": "cpu", "KERNELSKILL_HARNESS_API_KEY": "k", "NCCL_DEBUG": "x",
                     "LD_PRELOAD": "/evil.so", "PYTHONSTARTUP": "/x.py", "HF_HOME": "/h"})
    assert {"CUDA_HOME", "CUDA_VISIBLE_DEVICES", "NVCC_APPEND_FLAGS", "KERNELSKILL_HARNESS_DEVICE"} <= set(env)
    for gone in ("CUDA_PASSPHRASE", "CUDA_SOMETHING", "NVCC_TOKEN", "KERNELSKILL_HARNESS_API_KEY", "NCCL_DEBUG",
                 "LD_PRELOAD", "PYTHONSTARTUP", "HF_HOME"):
        assert gone not in env, gone


# ---- 12: the profile worker ------------------------------------------------------------------------
@needs_namespaces
def test_profile_worker_runs_in_the_sandbox_and_says_so(world):
    probe = world.probe("probe_profile.py")
    res = _run(PROFILE_ONE, {"task": str(ADD), "candidate": str(probe), "cache": str(world.cache),
                             "home": str(world.home)}, world, KERNELSKILL_NCU=str(FAKE_NCU))
    assert res["isolation"] == "namespaces" and res["ok"], res["message"]
    found = json.loads(res["rows"][0]["Kernel Name"])
    assert found["write"]["package_init"] in denied({"sandbox_identity": res["identity"]}), found
    assert found["unix"] == "socket:EPERM" and found["write"]["own_plant"] == "EROFS", found
    assert all(v != "secret" for v in found["read"].values()) and found["env"] == [], found
    if AS_ROOT:  # the profiler's sandbox is unprivileged as well (the driver grants counters by capability)
        assert res["identity"].startswith("unprivileged") and found["read"]["root_only"] == "unreadable:EACCES"
    assert world.unchanged()


def test_profile_worker_says_process_only_when_forced(world):
    res = _run(PROFILE_ONE, {"task": str(ADD), "candidate": str(CASES / "cpu" / "good_add.py"),
                             "cache": str(world.cache), "home": str(world.home)}, world,
               KERNELSKILL_NCU=str(FAKE_NCU), KERNELSKILL_HARNESS_ISOLATION="process")
    assert res["isolation"] == "process-only" and res["ok"], res["message"]
    # where its seconds went: the profiler's process, and the worker's stages inside it
    times = res["details"]["stage_times_s"]
    assert 0 < times["end"] <= res["details"]["ncu_seconds"] and "load_task" in times, res["details"]


# ---- without namespaces: refused unless --allow-weak-isolation --------------------------------------
def test_weak_isolation_is_refused_unless_allowed(monkeypatch):
    monkeypatch.setattr(isolation, "available", lambda: isolation.PROCESS_ONLY)
    from kernelskill.pipeline.harness import preflight

    monkeypatch.setattr(preflight, "available_isolation", lambda: isolation.PROCESS_ONLY)
    with pytest.raises(WeakIsolation) as err:
        require_isolation(False)
    assert err.value.exit_code == 2 and "--allow-weak-isolation" in str(err.value) and "\n" not in str(err.value)
    assert require_isolation(True) == isolation.PROCESS_ONLY


def test_optimize_refuses_without_namespaces(monkeypatch, tmp_path):
    from kernelskill.cli import main
    from kernelskill.commands import optimize as optimize_cmd
    from kernelskill.pipeline.harness import preflight

    monkeypatch.setattr(preflight, "available_isolation", lambda: isolation.PROCESS_ONLY)
    monkeypatch.setattr(optimize_cmd, "gpu_stops", lambda evaluator, stops: (stops, None))  # as on a GPU box
    res = CliRunner().invoke(main, ["--home", str(tmp_path / "h"), "optimize", str(ADD), "--llm", "exchange"])
    assert res.exit_code == 2, res.output
    assert "process-only" in res.output and "--allow-weak-isolation" in res.output
    assert len([ln for ln in res.output.splitlines() if ln.startswith("error:")]) == 1


def test_errno_names_used_by_the_probe_exist():
    assert {"EROFS", "EPERM", "ENOENT", "EACCES"} <= set(errno.errorcode.values())
    assert SECRETS and Path(FAKE_NCU).stat().st_mode & 0o111


def test_runs_resume_refuses_without_namespaces(monkeypatch, tmp_path):
    """Resuming a run runs its candidates here just as optimize does: the same refusal, the same flag."""
    from kernelskill.cli import main
    from kernelskill.commands import optimize as optimize_cmd
    from kernelskill.pipeline.harness import preflight

    home = str(tmp_path / "h")
    first = CliRunner().invoke(main, ["--home", home, "optimize", str(ADD), "--llm", "exchange", "--stop-before", "gpu"])
    assert first.exit_code == 3, first.output  # paused at its first LLM step: nothing ran
    run_id = next(p.name for p in (tmp_path / "h" / "runs").iterdir())
    monkeypatch.setattr(preflight, "available_isolation", lambda: isolation.PROCESS_ONLY)
    monkeypatch.setattr(optimize_cmd, "gpu_stops", lambda evaluator, stops: (stops, None))  # as on a GPU box
    res = CliRunner().invoke(main, ["--home", home, "runs", "resume", run_id])
    assert res.exit_code == 2, res.output
    assert "process-only" in res.output and "--allow-weak-isolation" in res.output
