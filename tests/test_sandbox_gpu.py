"""Issue 27 on a GPU: the sandbox's attacks through the CUDA path (evaluation and profile workers).

CUDA must come up inside the sandbox (read-only world, no capabilities, the Unix-socket filter), honest
CUDA candidates must still pass, and the same attacks as tests/test_sandbox_attacks.py must fail the
same way. Imports the harness, torch and the standard library only. Run on a CUDA machine:

    python -m pytest -q -m gpu tests/test_sandbox_gpu.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelskill.pipeline.harness import isolation, sandbox
from kernelskill.pipeline.harness.profiling import find_ncu
from tests.sandbox_attacks import (
    ADD,
    CASES,
    EVALUATE_MANY,
    FAKE_NCU,
    PROFILE_ONE,
    World,
    denied,
    findings,
    forging_candidate,
    run_script,
    sampled_misbehaviours,
    world_for,
)

pytestmark = pytest.mark.gpu

GPU_ADD = CASES / "tasks" / "add.py"
HONEST = ["good_add_fastpath", "good_add_inline", "good_add_triton"]
FORGERIES = {
    "forge_file_exit": (["result_file"], "exit0", False),
    "forge_print_exit": (["print_result", "print_record"], "exit0", False),
    "forge_pipes_correct": (["write_pipes"], "return_correct", False),
    "forge_file_at_import_correct": (["result_tmp"], "return_correct", True),
    "kill_self": ([], "sigkill", False),
    "close_channel_correct": ([], "close_fds_return", False),
}
SAMPLED = sampled_misbehaviours(4, seed=2027)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    yield from world_for(tmp_path_factory.mktemp("sandbox-gpu-world"))


def _run(script: str, spec: dict, world: World, **env: str) -> object:
    return run_script(script, spec, world, timeout=1500, **env)


NAMESPACED = isolation.available() == isolation.NAMESPACES
#: without namespaces the attacks would reach the host: they are not run (the first test fails instead)
needs_namespaces = pytest.mark.skipif(not NAMESPACED, reason="no user namespaces: attacks not run")


@pytest.fixture(scope="module")
def results(world):
    if not NAMESPACED:
        pytest.skip("no user namespaces on this machine: the attacks are not run")
    task = GPU_ADD if GPU_ADD.is_file() else ADD
    jobs = [("probe", str(world.probe()))]
    jobs += [(name, str(CASES / "gpu" / f"{name}.py")) for name in HONEST if (CASES / "gpu" / f"{name}.py").is_file()]
    for name, (actions, ending, at_import) in FORGERIES.items():
        jobs.append((name, str(world.write(f"{name}.py", forging_candidate(actions, ending, at_import=at_import)))))
    for name, actions, ending, at_import in SAMPLED:
        jobs.append((name, str(world.write(f"{name}.py", forging_candidate(actions, ending, at_import=at_import)))))
    out = _run(EVALUATE_MANY, {"task": str(task), "cache": str(world.cache), "home": str(world.home), "jobs": jobs,
                               "gpus": None, "slots": 1, "time": True,
                               # torch.compile's workers must still work under the socket filter
                               "baseline": "compile", "timeout": 300}, world)
    return {r["details"]["tag"]: r for r in out}


def test_namespaces_are_available_on_the_gpu_box():
    assert isolation.available() == isolation.NAMESPACES, "the GPU box offers no user namespaces"


def test_cuda_starts_inside_the_sandbox(tmp_path):
    """The driver comes up in a sandboxed process (the first wave-3 trip found cuInit failing there: a
    read-only /proc refuses the thread names CUDA writes)."""
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    env = sandbox.scrub_env()
    cmd = isolation.wrap([sys.executable, "-c", code], workdir=tmp_path, env=env, read_only=[], writable=[])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("name", HONEST)
def test_cuda_candidates_pass_inside_the_sandbox(results, name):
    if name not in results:
        pytest.skip(f"{name} is not a case here")
    res = results[name]
    assert res["status"] == "ok" and res["correct"] and res["speedup"] > 0, res["message"]
    assert res["details"]["isolation"] == "namespaces"
    assert res["details"].get("gpu"), "the sandboxed worker evaluated without a GPU"
    assert res["compile_ms"] is not None, res["details"].get("compile_baseline")


def test_probe_on_the_gpu_path(world, results):
    res = results["probe"]
    assert res["status"] == "runtime_error" and res["details"]["isolation"] == "namespaces", res["message"]
    found = findings(res["message"])
    no = denied(res["details"])  # as root, the unprivileged uid may meet EACCES before EROFS
    assert found["write"]["package_init"] in no and found["write"]["package_module"] in no, found
    assert found["write"]["own_plant"] == "EROFS", found  # the world is read-only for the sandbox's uid too
    assert found["write"]["cwd_toml"] in ("EROFS", "EACCES"), found
    assert found["write"]["home_toml"] in (*no, "ENOENT"), found
    assert all(v != "secret" for v in found["read"].values()), found
    if os.geteuid() == 0:  # the GPU box runs as root: its candidates are uid 65534 on the host all the same
        # (a fallback here, e.g. device nodes 65534 may not open, names its reason in sandbox_identity)
        assert res["details"]["sandbox_identity"].startswith("unprivileged"), res["details"]
        assert found["read"]["root_only"] == "unreadable:EACCES", found
        assert found["read"]["shadow"].startswith("unreadable:"), found
    for key in world.host_targets:
        assert found["write"][key] in (*no, "ENOENT"), (key, found["write"][key])
    assert found["unix"] == "socket:EPERM" and found["socketpair"] == "x", found
    assert found["env"] == [] and not world.accepted(), found
    assert all(v in (*no, "ENOENT") for v in found["cache"].values()), found
    assert world.unchanged()


@pytest.mark.parametrize("name", [*FORGERIES, *(s[0] for s in SAMPLED)])
def test_no_forgery_passes_on_the_gpu_path(results, name):
    res = results[name]
    assert res["status"] != "ok", (name, res["message"])
    actions = FORGERIES[name][0] if name in FORGERIES else next(s[1] for s in SAMPLED if s[0] == name)
    if name in FORGERIES and actions:
        assert res["status"] == "cheat" and res["details"]["cheat_check"] == "forged_result", res["message"]


@needs_namespaces
def test_profile_worker_on_the_gpu_is_sandboxed(world):
    """The profile worker (a stand-in profiler that reports the probe) runs the candidate on the GPU path
    inside the sandbox."""
    res = _run(PROFILE_ONE, {"task": str(GPU_ADD if GPU_ADD.is_file() else ADD), "candidate": str(world.probe("pp.py")),
                             "cache": str(world.cache), "home": str(world.home)}, world, KERNELSKILL_NCU=str(FAKE_NCU))
    assert res["isolation"] == "namespaces" and res["ok"], res["message"]
    found = json.loads(res["rows"][0]["Kernel Name"])
    assert found["write"]["package_init"] in denied({"sandbox_identity": res["identity"]}), found
    assert found["unix"] == "socket:EPERM" and found["write"]["own_plant"] == "EROFS", found
    assert all(v != "secret" for v in found["read"].values()) and found["env"] == [], found
    assert world.unchanged()


@needs_namespaces
def test_real_ncu_profiles_inside_the_sandbox(world):
    """Nsight Compute itself runs inside the sandbox: a profile of an honest CUDA candidate has kernel rows
    (or, where the driver keeps the counters for administrators, says so) and names its isolation."""
    if find_ncu() is None:
        pytest.skip("no ncu on this machine")
    cand = CASES / "gpu" / "good_add_fastpath.py"
    res = _run(PROFILE_ONE, {"task": str(GPU_ADD if GPU_ADD.is_file() else ADD), "candidate": str(cand),
                             "cache": str(world.cache), "home": str(world.home)}, world)
    assert res["isolation"] == "namespaces", res["message"]
    if not res["ok"]:
        assert "ERR_NVGPUCTRPERM" in res["message"] or "permission" in res["message"], res["message"][-2000:]
        pytest.skip("the driver restricts the counters to administrators: " + res["message"][:200])
    assert res["rows"] and any("add" in r.get("Kernel Name", "").lower() or r.get("Kernel Name") for r in res["rows"])
    times = res["details"]["stage_times_s"]  # where a profile's seconds go, printed for the trip's log
    print("profile seconds: ncu", res["details"]["ncu_seconds"], "| worker stages", times)
    assert times["load_task"] <= times["warmup"] <= times["profiled_forward"] <= times["end"]
    # the probe under the real profiler: what it tried changed nothing on the host
    _run(PROFILE_ONE, {"task": str(GPU_ADD if GPU_ADD.is_file() else ADD), "candidate": str(world.probe("pr.py")),
                       "cache": str(world.cache), "home": str(world.home)}, world)
    assert world.unchanged() and not world.accepted()
