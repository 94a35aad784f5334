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

import atexit
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


@dataclass
class _Ready:
    """A worker started ahead of its job (``worker --ready``): torch imported, waiting for a request."""

    proc: subprocess.Popen[bytes]
    workdir: Path
    err: Any
    mode: str
    started: float


_READY: dict[str, _Ready] = {}
_READY_LOCK = threading.Lock()
#: env_extra entries that differ per candidate: the ready worker gets them with its request
PER_JOB_ENV = ("TORCH_EXTENSIONS_DIR",)


def _start_ready(key: str, env_extra: dict[str, str]) -> None:
    """Start the worker that the next job of ``key`` will take (one per key; the old one, if any, stays)."""
    with _READY_LOCK:
        old = _READY.get(key)
        if old is not None and old.proc.poll() is None:
            return
        workdir = Path(tempfile.mkdtemp(prefix="ks-worker-"))
        shared = {k: v for k, v in env_extra.items() if k not in PER_JOB_ENV}
        ext = env_extra.get("TORCH_EXTENSIONS_DIR")  # CACHE_ROOT/<build key>/ext: the whole root is bound
        cmd, env, mode = _command(["--ready", str(workdir)], workdir, shared, files=[], command_prefix=None,
                                  cache=str(Path(ext).parents[1]) if ext else None)
        err = open(workdir / "stderr.txt", "wb")  # noqa: SIM115 - closed when the job ends
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=err,
                                stderr=subprocess.STDOUT, start_new_session=True)
        _READY[key] = _Ready(proc, workdir, err, mode, time.monotonic())


def _take_ready(key: str) -> _Ready | None:
    with _READY_LOCK:
        ready = _READY.pop(key, None)
    if ready is not None and ready.proc.poll() is None:
        return ready
    if ready is not None:
        ready.err.close()
        shutil.rmtree(ready.workdir, ignore_errors=True)
    return None


def _cuda_go(key: str) -> None:
    """Tell the waiting worker of ``key`` that no timed run is going on: it may bring CUDA up."""
    with _READY_LOCK:
        ready = _READY.get(key)
    if ready is not None:
        (ready.workdir / "cuda.go").touch()


def stop_ready_workers() -> None:
    """End every waiting worker (they run no candidate code; called at exit)."""
    with _READY_LOCK:
        items = list(_READY.values())
        _READY.clear()
    for ready in items:
        _kill_group(ready.proc)
        ready.err.close()
        shutil.rmtree(ready.workdir, ignore_errors=True)


atexit.register(stop_ready_workers)


def _command(args: list[str], workdir: Path, env_extra: dict[str, str] | None, *, files: list[str],
             command_prefix: list[str] | None, cache: str | None = None) -> tuple[list[str], dict[str, str], str]:
    """(command line, environment, isolation) of a worker in ``workdir`` with worker arguments ``args``."""
    env = scrub_env(extra=env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_pythonpath(), env.get("PYTHONPATH", "")) if p)
    env["HOME"] = str(workdir)  # nothing of the user's home (configs, tokens) is in reach
    env["TMPDIR"] = str(workdir)
    cmd = [*(command_prefix or []), sys.executable, "-m", "kernelskill.pipeline.harness.worker", *args]
    # The profiler (command_prefix) drives the GPU's counters from outside: it runs without namespaces.
    mode = isolation.available() if command_prefix is None else isolation.PROCESS_ONLY
    if mode == isolation.NAMESPACES:
        writable = [v for k, v in (env_extra or {}).items() if k.endswith(("_DIR", "_CACHE", "_ROOT"))]
        for folder in writable:  # made now, so that one under the hidden home is bound back, not lost
            Path(folder).expanduser().mkdir(parents=True, exist_ok=True)
        cmd = isolation.wrap(cmd, workdir=workdir, env=env, read_only=files,
                             writable=[*writable, *([str(Path(cache).expanduser())] if cache else [])])
    return cmd, env, mode


def run_worker(
    request: dict[str, Any],
    *,
    timeout_s: float,
    max_rss_gb: float = 64.0,
    env_extra: dict[str, str] | None = None,
    keep_workdir: bool = False,
    command_prefix: list[str] | None = None,
    full_output: bool = False,
    ready_key: str | None = None,
) -> WorkerOutcome:
    """Run the worker on ``request`` and return its result (or why there is none).

    ``command_prefix`` wraps the interpreter (the profiler puts ``ncu ...`` there). With ``ready_key``
    the job goes to a worker of that key started ahead of it (torch imported, CUDA up) when one is
    waiting, and the next one is started at once: a fresh process per job all the same. The key must
    name everything of ``env_extra`` but :data:`PER_JOB_ENV` (the device, the cache root).
    """
    ready = _take_ready(ready_key) if ready_key and command_prefix is None else None
    workdir = ready.workdir if ready is not None else Path(tempfile.mkdtemp(prefix="ks-worker-"))
    req_path = workdir / "request.json"
    res_path = workdir / "result.json"
    stage_path = workdir / "stage.txt"
    request = dict(request, stage_file=str(stage_path))
    if ready is not None:  # its sandbox was made before the files were known: they come along in workdir
        for name in ("task", "candidate"):
            if isinstance(request.get(name), str) and Path(request[name]).is_file():
                copy = workdir / f"{name}{Path(request[name]).suffix}"
                shutil.copyfile(request[name], copy)
                request[name] = str(copy)
        request["env"] = {k: v for k, v in (env_extra or {}).items() if k in PER_JOB_ENV}
    cache = request.get("config", {}).get("cache_dir") if isinstance(request.get("config"), dict) else None
    if ready is None:
        req_path.write_text(json.dumps(request))
        files = [str(request[k]) for k in ("task", "candidate") if isinstance(request.get(k), str)]
        cmd, env, mode = _command([str(req_path), str(res_path)], workdir, env_extra, files=files,
                                  command_prefix=command_prefix, cache=cache)
    if ready_key and command_prefix is None:
        _start_ready(ready_key, dict(env_extra or {}))  # imports torch while this job runs; CUDA waits
    stderr_path = workdir / "stderr.txt"
    start = time.monotonic()
    timed_out = rss_killed = False
    peak = 0.0
    with (ready.err if ready is not None else open(stderr_path, "wb")) as err:
        if ready is not None:
            proc, mode = ready.proc, ready.mode
            tmp = workdir / "request.tmp"
            tmp.write_text(json.dumps(request))
            os.replace(tmp, req_path)  # the waiting worker starts on it
        else:
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
    if ready_key and command_prefix is None:
        _cuda_go(ready_key)
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
