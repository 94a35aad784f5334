"""Run one harness worker in its own process group, with a scrubbed environment and hard limits.

Where the machine offers user namespaces the worker also runs inside new user/PID/mount/network
namespaces (:mod:`.isolation`): it sees no process but its own, none of the user's files that hold
secrets, and no network. ``WorkerOutcome.isolation`` says which isolation ran.

The worker is ``python -m kernelskill.pipeline.harness.worker REQUEST RESULT`` started with
``start_new_session=True`` (so it leads a new process group) in a fresh temporary folder. The parent
enforces a wall-clock limit and a host-RSS limit on the whole group and kills the group (SIGKILL)
when either is crossed; the worker itself sets RLIMIT_FSIZE (RLIMIT_AS is left alone: CUDA reserves
huge virtual address ranges). A crash (segfault, sticky CUDA error, os._exit) ends that child only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import isolation

log = logging.getLogger(__name__)

#: variables always passed through (exact names)
KEEP_EXACT = {
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "SHELL",
    "PYTHONPATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "TORCH_EXTENSIONS_DIR",
    "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX", "TRITON_CACHE_DIR", "VIRTUAL_ENV",
    "OMP_NUM_THREADS", "PYTORCH_NVCC", "CCACHE_DIR", "NVIDIA_VISIBLE_DEVICES",
}
#: prefixes passed through (CUDA and toolchain configuration)
KEEP_PREFIXES = ("CUDA", "NVCC", "NVIDIA_DRIVER", "CUBLAS", "CUDNN", "NCCL_", "KERNELSKILL_HARNESS_")
#: a variable whose name matches this never reaches a candidate, even if listed above
SECRET_RE = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)


def scrub_env(environ: dict[str, str] | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a candidate sees: toolchain and CUDA settings, never secrets."""
    src = dict(os.environ if environ is None else environ)
    out: dict[str, str] = {}
    for name, value in src.items():
        if SECRET_RE.search(name):
            continue
        if name in KEEP_EXACT or name.startswith(KEEP_PREFIXES):
            out[name] = value
    for name, value in (extra or {}).items():
        if not SECRET_RE.search(name):
            out[name] = value
    out.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    out["PYTHONUNBUFFERED"] = "1"
    out.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    return out


def package_pythonpath() -> str:
    """A PYTHONPATH under which ``import kernelskill`` finds this very package."""
    pkg_dir = Path(__file__).resolve().parents[2]  # .../kernelskill (the repository root)
    parent = pkg_dir.parent
    if pkg_dir.name == "kernelskill":
        return str(parent)
    # one link folder per checkout: two checkouts sharing one link would hand a worker the other
    # checkout's code (and race each other replacing it)
    tag = hashlib.sha256(str(pkg_dir).encode()).hexdigest()[:12]
    link_root = Path(tempfile.gettempdir()) / f"kernelskill-pp-{os.getuid()}-{tag}"
    link_root.mkdir(exist_ok=True)
    link = link_root / "kernelskill"
    if not (link.is_symlink() and link.resolve() == pkg_dir):
        tmp = link_root / f".link-{os.getpid()}-{threading.get_ident()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(pkg_dir)
        os.replace(tmp, link)
    return str(link_root)


@dataclass
class WorkerOutcome:
    """What came back from one worker process."""

    result: dict[str, Any] | None
    returncode: int | None
    timed_out: bool = False
    rss_killed: bool = False
    seconds: float = 0.0
    stage: str = ""
    stderr_tail: str = ""
    peak_rss_mb: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    isolation: str = isolation.PROCESS_ONLY

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def _group_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants (Linux /proc)."""
    total = 0
    todo = [pid]
    seen: set[int] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return total / 2**20


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def run_worker(
    request: dict[str, Any],
    *,
    timeout_s: float,
    max_rss_gb: float = 64.0,
    env_extra: dict[str, str] | None = None,
    keep_workdir: bool = False,
    command_prefix: list[str] | None = None,
    full_output: bool = False,
) -> WorkerOutcome:
    """Run the worker on ``request`` and return its result (or why there is none).

    ``command_prefix`` wraps the interpreter (the profiler puts ``ncu ...`` there).
    """
    workdir = Path(tempfile.mkdtemp(prefix="ks-worker-"))
    req_path = workdir / "request.json"
    res_path = workdir / "result.json"
    stage_path = workdir / "stage.txt"
    request = dict(request, stage_file=str(stage_path))
    req_path.write_text(json.dumps(request))
    env = scrub_env(extra=env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_pythonpath(), env.get("PYTHONPATH", "")) if p)
    env["HOME"] = str(workdir)  # nothing of the user's home (configs, tokens) is in reach
    env["TMPDIR"] = str(workdir)
    cmd = [*(command_prefix or []), sys.executable, "-m", "kernelskill.pipeline.harness.worker",
           str(req_path), str(res_path)]
    # The profiler (command_prefix) drives the GPU's counters from outside: it runs without namespaces.
    mode = isolation.available() if command_prefix is None else isolation.PROCESS_ONLY
    if mode == isolation.NAMESPACES:
        files = [str(request[k]) for k in ("task", "candidate") if isinstance(request.get(k), str)]
        cache = request.get("config", {}).get("cache_dir") if isinstance(request.get("config"), dict) else None
        writable = [v for k, v in (env_extra or {}).items() if k.endswith(("_DIR", "_CACHE", "_ROOT"))]
        for folder in writable:  # made now, so that one under the hidden home is bound back, not lost
            Path(folder).expanduser().mkdir(parents=True, exist_ok=True)
        cmd = isolation.wrap(cmd, workdir=workdir, env=env, read_only=files,
                             writable=[*writable, *([str(Path(cache).expanduser())] if cache else [])])
    stderr_path = workdir / "stderr.txt"
    start = time.monotonic()
    timed_out = rss_killed = False
    peak = 0.0
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=err,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while True:
                try:
                    proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    pass
                rss = _group_rss_mb(proc.pid)
                peak = max(peak, rss)
                if time.monotonic() - start > timeout_s:
                    timed_out = True
                    _kill_group(proc)
                elif rss > max_rss_gb * 1024:
                    rss_killed = True
                    _kill_group(proc)
        finally:
            if proc.poll() is None:
                _kill_group(proc)
                proc.wait()
            # leftovers of the group (a grandchild that outlived the worker) go as well
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    seconds = time.monotonic() - start
    returncode = proc.returncode
    if mode == isolation.NAMESPACES:  # the launcher saw how the worker itself ended
        inner = isolation.read_status(workdir)
        if inner is not None and not (timed_out or rss_killed):
            returncode = inner
    result = None
    if res_path.is_file():
        try:
            result = json.loads(res_path.read_text())
        except json.JSONDecodeError:
            result = None
    stage = stage_path.read_text().strip().splitlines()[-1] if stage_path.is_file() else ""
    raw = stderr_path.read_bytes() if stderr_path.is_file() else b""
    tail = raw[-4000:].decode("utf-8", "replace")
    extra = {"output": raw.decode("utf-8", "replace")} if full_output else {}
    if not keep_workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    outcome = WorkerOutcome(result=result, returncode=returncode, timed_out=timed_out,
                            rss_killed=rss_killed, seconds=seconds, stage=stage, stderr_tail=tail,
                            peak_rss_mb=round(peak, 1), extra=extra, isolation=mode)
    log.debug("worker %s: rc=%s %.1fs stage=%s isolation=%s", request.get("mode"), returncode, seconds, stage,
              mode)
    return outcome
