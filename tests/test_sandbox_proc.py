"""The sandbox's /proc: writable for the sandbox's own processes (CUDA's cuInit names its threads through
``/proc/<pid>/task/<tid>/comm`` and fails with error 304 when it cannot: the first wave-3 GPU trip found
every sandboxed worker without CUDA), read-only for everything else in it (sysctls, sysrq-trigger, the
driver's files, irq and bus settings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.pipeline.harness import isolation, sandbox

#: why namespaces do not start here (the /proc property under test does not count: its tests must fail)
PROBLEM = isolation._probe()
pytestmark = pytest.mark.skipif(PROBLEM not in (None, isolation.PROC_READ_ONLY),
                                reason=f"user namespaces are not available here: {PROBLEM}")

#: run inside the sandbox: what a thread of the worker can write of /proc (opening for writing is the test:
#: nothing is ever written to a shared entry, and a process's own comm gets a name only)
SCRIPT = r'''
import errno, json, os, stat, threading

def can_open_for_writing(path):
    try:
        os.close(os.open(path, os.O_WRONLY))
        return "writable"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

out = {}
try:
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as fh:
        fh.write("ks-worker")
    out["own comm"] = "writable"
except OSError as exc:
    out["own comm"] = errno.errorcode.get(exc.errno, str(exc.errno))
seen = {}
# what this process's own uid owns, and what root of the host owns (seen as the overflow uid: a user namespace
# maps neither the host's root nor, as root's sandbox, any id but its own)
owners = {os.getuid(), int(open("/proc/sys/kernel/overflowuid").read())}
for root, dirs, files in os.walk("/proc", followlinks=False):
    top = root.split("/")[2] if root.count("/") >= 2 else ""
    if root == "/proc":
        dirs[:] = [d for d in dirs if not d.isdigit() and d not in ("self", "thread-self")]
        files = [f for f in files if not f.isdigit()]
    for name in files:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o222 and st.st_uid in owners:
            seen[path] = can_open_for_writing(path)
    if len(seen) > 4000:
        break
out["shared"] = seen
print("PROC " + json.dumps(out))
'''


def _in_sandbox(tmp_path: Path) -> dict:
    script = tmp_path / "proc_probe.py"
    script.write_text(SCRIPT)
    work = tmp_path / "work"
    work.mkdir()
    env = sandbox.scrub_env()
    cmd = isolation.wrap([sys.executable, "-I", "-S", str(script)], workdir=work, env=env,
                         read_only=[str(script)], writable=[])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=120)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("PROC ")), None)
    assert line is not None, proc.stderr[-2000:]
    return json.loads(line[5:])


def test_a_worker_can_name_its_own_threads_as_cuinit_does(tmp_path):
    assert _in_sandbox(tmp_path)["own comm"] == "writable"


def test_nothing_of_proc_but_the_sandbox_s_own_processes_can_be_opened_for_writing(tmp_path):
    shared = _in_sandbox(tmp_path)["shared"]
    assert shared, "no writable-looking entry of /proc was found to try"
    assert "/proc/sys/kernel/hostname" in shared  # a sysctl of the host (the sandbox shares its UTS namespace)
    opened = {path: how for path, how in shared.items() if how == "writable"}
    assert opened == {}


def test_the_isolation_probe_requires_the_own_proc_to_be_writable():
    # the probe that decides namespaces vs process-only checks the property CUDA needs, not only a read-only /
    assert PROBLEM is None


#: a stand-in for the NVIDIA driver library (the GPU boundary, on a machine without one): cuInit names its
#: thread as the real one does and returns 304 when it cannot; built with ``failing_inside`` it also returns
#: 999 inside the sandbox (its PID 1 is the launcher), as a sandbox that took the GPU away would
FAKE_LIBCUDA = r"""
#include <stdio.h>
#include <string.h>
int cuInit(unsigned int flags) {
    FILE *f = fopen("/proc/thread-self/comm", "w");
    if (!f) return 304;
    fputs("cuda-EvtHandlr", f);
    fclose(f);
#ifdef FAILING_INSIDE
    char cmd[4096] = {0};
    FILE *c = fopen("/proc/1/cmdline", "r");
    if (c) {
        size_t n = fread(cmd, 1, sizeof cmd - 1, c);
        fclose(c);
        for (size_t i = 0; i < n; i++) if (!cmd[i]) cmd[i] = ' ';
        if (strstr(cmd, "isolation.py")) return 999;
    }
#endif
    return 0;
}
"""


def _fake_driver(tmp_path: Path, *, failing_inside: bool) -> Path:
    import shutil

    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the stand-in driver library")
    lib = tmp_path / "lib"
    lib.mkdir()
    (tmp_path / "fake.c").write_text(FAKE_LIBCUDA)
    flags = ["-DFAILING_INSIDE"] if failing_inside else []
    subprocess.run(["cc", "-shared", "-fPIC", *flags, "-o", str(lib / "libcuda.so.1"), str(tmp_path / "fake.c")],
                   check=True)
    return lib


@pytest.mark.parametrize("failing_inside", [False, True])
def test_the_probe_checks_that_cuda_starts_inside_the_sandbox(tmp_path, monkeypatch, failing_inside):
    lib = _fake_driver(tmp_path, failing_inside=failing_inside)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    real_exists = isolation.os.path.exists
    monkeypatch.setattr(isolation.os.path, "exists", lambda p: p == "/dev/nvidiactl" or real_exists(p))
    problem = isolation._probe()
    if failing_inside:
        assert problem is not None and "CUDA does not start inside the sandbox" in problem and "999" in problem
    else:
        assert problem is None
