"""Who the sandbox's root is on the host. As root, kernelskill maps it to an unprivileged uid (65534) with its
own launcher (no newuidmap, no bubblewrap); where that cannot be done, it falls back to the root mapping and
says so. Real sandboxes and real files throughout: the attacks themselves are in tests/test_sandbox_attacks.py.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kernelskill.pipeline.harness import EvalConfig, evaluate, isolation, sandbox
from kernelskill.pipeline.harness.preflight import HarnessUnavailable

CASES = Path(__file__).parent / "harness_cases"
ADD = CASES / "tasks" / "add_small.py"
GOOD = CASES / "cpu" / "good_add.py"
AS_ROOT = os.geteuid() == 0
NAMESPACED = isolation.available() == isolation.NAMESPACES
needs_root_sandbox = pytest.mark.skipif(not (AS_ROOT and NAMESPACED),
                                        reason="needs the suite to run as root, with user namespaces")


@pytest.fixture
def outside(tmp_path):
    """A folder outside every hidden and scratch folder (the sandbox shows it as it is): beside this file."""
    base = Path(__file__).parent / f".ks-identity-{os.getpid()}-{tmp_path.name}"
    base.mkdir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _cfg(tmp_path: Path) -> EvalConfig:
    return EvalConfig(cache_dir=str(tmp_path / "cache"), time=False, correctness_trials=1, alt_shapes=False)


def test_the_driver_s_counter_restriction_is_read_from_its_params(tmp_path):
    params = tmp_path / "params"
    params.write_text("ModifyDeviceFiles: 1\nRmProfilingAdminOnly: 1\nPreserveVideoMemoryAllocations: 0\n")
    assert isolation.counters_admin_only(str(params))
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert not isolation.counters_admin_only(str(params))
    assert not isolation.counters_admin_only(str(tmp_path / "absent"))  # no driver: not restricted


def test_the_unprivileged_id_is_a_named_setting(monkeypatch, caplog):
    if not AS_ROOT:
        assert isolation.outer_id() is None  # an ordinary user's sandbox is that user: unchanged
        return
    assert isolation.outer_id() == isolation.UNPRIVILEGED_ID == 65534
    monkeypatch.setenv(isolation.ENV_SANDBOX_ID, "54321")
    assert isolation.outer_id() == 54321
    with caplog.at_level(logging.WARNING):
        monkeypatch.setenv(isolation.ENV_SANDBOX_ID, "0")  # root again: refused
        assert isolation.outer_id() == 65534
    assert isolation.ENV_SANDBOX_ID in caplog.text


@needs_root_sandbox
def test_root_kept_by_choice_runs_and_says_so_in_every_result(tmp_path, monkeypatch):
    """The way out for a GPU box where uid 65534 cannot reach the GPU or the toolchain: the root mapping,
    named in the result with what it gives away."""
    monkeypatch.setenv(isolation.ENV_SANDBOX_ID, "root")
    assert isolation.outer_id() is None
    who = isolation.sandbox_identity()
    assert who.name == isolation.ROOT and "KERNELSKILL_HARNESS_SANDBOX_ID=root" in who.describe()
    res = evaluate(ADD, GOOD, _cfg(tmp_path))
    assert res.status == "ok", res.message
    assert res.details["sandbox_identity"].startswith("root without capabilities (KERNELSKILL_HARNESS_SANDBOX_ID=root")


@needs_root_sandbox
def test_as_root_workers_get_the_unprivileged_identity():
    who = isolation.sandbox_identity()
    assert (who.name, who.outer) == (isolation.UNPRIVILEGED, isolation.outer_id())
    assert who.describe().startswith("unprivileged (uid 65534")


FALLBACK = """
import json, logging, sys
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from kernelskill.pipeline.harness import EvalConfig, evaluate, isolation
mode = isolation.available()
who = isolation.sandbox_identity()
cfg = EvalConfig(cache_dir=sys.argv[3], time=False, correctness_trials=1, alt_shapes=False)
res = evaluate(sys.argv[1], sys.argv[2], cfg)
print(json.dumps({"mode": mode, "who": who.name, "status": res.status, "message": res.message,
                  "identity": res.details.get("sandbox_identity")}))
"""


@pytest.mark.skipif(not NAMESPACED, reason="user namespaces are not available here")
def test_a_root_that_cannot_map_the_unprivileged_uid_falls_back_and_says_so(tmp_path):
    """A root whose own user namespace has no uid 65534 (a container that maps only its root; made here with
    ``unshare --map-root-user``): the map cannot be written, so the sandbox keeps the root mapping, with a
    warning and the reason in every result, never a traceback."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (sandbox.package_pythonpath(), os.environ.get("PYTHONPATH", "")) if p))
    cmd = [isolation._unshare(), "--user", "--map-root-user", "--", sys.executable, "-c", FALLBACK, str(ADD),
           str(GOOD), str(tmp_path / "cache")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["mode"] == isolation.NAMESPACES and out["who"] == isolation.ROOT, out
    assert out["status"] == "ok", out["message"]
    assert out["identity"].startswith("root without capabilities (the unprivileged uid 65534 could not be set up"), out
    assert "could not be mapped to the unprivileged uid 65534" in proc.stderr and "Traceback" not in proc.stderr


@needs_root_sandbox
def test_as_root_a_needed_file_the_sandbox_cannot_read_is_one_clear_line(tmp_path, outside):
    task = outside / "task.py"
    shutil.copyfile(ADD, task)
    task.chmod(0o600)  # root's own: the unprivileged uid cannot read it
    before = _handed_over()
    with pytest.raises(HarnessUnavailable) as err:
        evaluate(task, GOOD, _cfg(tmp_path))
    text = str(err.value)
    assert f"cannot read {task}" in text and "mode 0600" in text and "\n" not in text
    assert _handed_over() <= before  # the work folder made for it is not left behind


def _handed_over() -> set[Path]:
    """Work folders of the sandbox's uid in the temporary folder (another process's, root's, do not count)."""
    out = set()
    for path in Path(tempfile.gettempdir()).glob("ks-worker-*"):
        try:
            if path.stat().st_uid == isolation.outer_id():
                out.add(path)
        except OSError:
            continue
    return out


@needs_root_sandbox
def test_as_root_a_candidate_under_a_private_folder_still_runs(tmp_path, outside):
    """A kept file under a 0700 folder that is not hidden: that folder becomes an empty tmpfs with the file
    bound back into it (nothing is chmod-ed); a file beside it stays out of reach."""
    private = outside / "private"
    private.mkdir(mode=0o700)
    cand = private / "candidate.py"
    shutil.copyfile(GOOD, cand)
    (private / "beside.txt").write_text("not the sandbox's\n")
    res = evaluate(ADD, cand, _cfg(tmp_path))
    assert res.status == "ok" and res.details["sandbox_identity"].startswith("unprivileged"), res.message
    assert stat_mode(private) == 0o700  # untouched


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


@needs_root_sandbox
def test_hand_over_follows_no_link_and_gives_away_no_hard_link(tmp_path, outside):
    outer = isolation.outer_id()
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "mine.txt").write_text("x")
    target = outside / "root-file.txt"  # a file of root's elsewhere
    target.write_text("root's")
    (work / "link").symlink_to(target)
    (work / "sub" / "linked-dir").symlink_to(outside, target_is_directory=True)
    os.link(target, work / "hard")
    isolation.hand_over(work, outer)
    assert (work / "sub" / "mine.txt").stat().st_uid == outer and work.stat().st_uid == outer
    assert target.stat().st_uid == 0 and outside.stat().st_uid == 0  # neither the link's nor the hard link's


@needs_root_sandbox
def test_the_builder_s_output_is_copied_back_as_root_s_own_without_setuid(tmp_path):
    outer = isolation.outer_id()
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "ext.so").write_bytes(b"built")
    (src / "suid").write_bytes(b"#!/bin/sh\n")
    (src / "rootfile").write_bytes(b"not the worker's")
    for name in ("ext.so", "suid"):
        os.chown(src / name, outer, outer)
    os.chmod(src / "suid", 0o4755)
    assert sandbox.copy_tree(src, dst, owner=outer) > 0
    assert sorted(p.name for p in dst.iterdir()) == ["ext.so", "suid"]  # never a file the worker did not write
    assert stat_mode(dst / "suid") == 0o755 and (dst / "suid").stat().st_uid == 0


@needs_root_sandbox
def test_the_launcher_refuses_a_spec_it_does_not_own(tmp_path):
    spec = tmp_path / "sandbox.spec.json"
    spec.write_text("{}")
    os.chown(spec, isolation.outer_id(), isolation.outer_id())  # planted by the sandbox's uid
    with pytest.raises(OSError, match="not a spec of the launcher's own"):
        isolation._read_own_spec(str(spec))
    assert isolation.main(["--map-to", str(isolation.outer_id()), str(spec)]) == 125


@needs_root_sandbox
def test_the_worker_log_is_read_only_as_the_worker_s_own_plain_file(tmp_path):
    outer = isolation.outer_id()
    secret = tmp_path / "root-only.txt"
    secret.write_text("root's secret")
    secret.chmod(0o600)
    log = tmp_path / "worker.log"
    log.symlink_to(secret)
    assert sandbox._worker_log(log, outer) is None
    log.unlink()
    log.write_text("output")
    assert sandbox._worker_log(log, outer) is None  # root's file, not the worker's
    os.chown(log, outer, outer)
    assert sandbox._worker_log(log, outer) == b"output"


@needs_root_sandbox
def test_as_root_a_run_made_under_umask_077_is_evaluated(tmp_path, outside):
    """A root whose umask is 077 (private folders, private files) still gets its run's candidates evaluated by
    the unprivileged sandbox: the task copy and the candidates are written readable (0644), the folders keep
    the umask's 0700 (the sandbox binds the kept files through them)."""
    from kernelskill.pipeline.runs.store import RunStore

    old = os.umask(0o077)
    try:
        run = RunStore(outside / "runs").create(ADD, {"model": "m", "options": {}})
        rel = run.write_candidate("r00.generate", GOOD.read_text())
    finally:
        os.umask(old)
    assert stat_mode(run.path) == 0o700
    assert stat_mode(run.path / rel) == 0o644 and stat_mode(run.task_path) == 0o644
    res = evaluate(run.task_path, run.path / rel, _cfg(tmp_path))
    assert res.status == "ok" and res.details["sandbox_identity"].startswith("unprivileged"), res.message
