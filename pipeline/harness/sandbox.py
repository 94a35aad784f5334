"""Run one harness worker in its own process group, with a scrubbed environment and hard limits, and
take its verdict from a channel the candidate cannot write to.

Where the machine offers user namespaces the worker also runs inside new user/PID/mount/network
namespaces (:mod:`.isolation`): it sees no process but its own, none of the user's secrets, a
read-only world but for its scratch folder, and no network. ``WorkerOutcome.isolation`` says which
isolation ran.

The worker is ``python -m kernelskill.pipeline.harness.worker`` started with ``start_new_session=True``
(so it leads a new process group) in a fresh temporary folder. The parent enforces a wall-clock limit
and a host-RSS limit on the whole group and kills the group (SIGKILL) when either is crossed; the
worker itself sets RLIMIT_FSIZE. A crash (segfault, sticky CUDA error, os._exit) ends that child only.

The result channel (:mod:`.channel` describes the record): the request, with a fresh random nonce,
arrives on the worker's stdin (a pipe: never on disk, never in the environment); the verdict goes back
through an inherited pipe opened before the candidate is imported, as stage lines and one final record
that carries the nonce and the stage list. The parent accepts only a complete, consistent record; no
file in a folder the candidate can write is ever read as a verdict. A record with another nonce, a
second record, a ``result.json`` in the work folder or a result printed on stdout is a forgery.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import channel, isolation
from .preflight import HarnessUnavailable

log = logging.getLogger(__name__)

#: variables passed through (exact names): the toolchain, CUDA and the locale, nothing else
KEEP_EXACT = {
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "SHELL",
    "PYTHONPATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "TORCH_EXTENSIONS_DIR",
    "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX", "TRITON_CACHE_DIR", "VIRTUAL_ENV",
    "OMP_NUM_THREADS", "PYTORCH_NVCC", "CCACHE_DIR", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING", "CUDA_CACHE_DISABLE", "CUDA_CACHE_MAXSIZE", "CUDA_FORCE_PTX_JIT",
    "CUDA_DISABLE_PTX_JIT", "CUDA_DEVICE_MAX_CONNECTIONS", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "NVCC", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN",
}
#: prefixes passed through: the harness's own switches only
KEEP_PREFIXES = ("KERNELSKILL_HARNESS_",)
#: a variable whose name matches this never reaches a candidate, even if listed above
SECRET_RE = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT", re.IGNORECASE)
#: the most output (stdout and stderr together) kept from one worker; past it only the tail is kept
OUTPUT_CAP = 64 * 2**20


def scrub_env(environ: dict[str, str] | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a candidate sees: an allowlist of toolchain and CUDA settings, never a secret
    (``CUDA_PASSPHRASE`` is not ``CUDA_HOME``: only exact names pass)."""
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
    if os.geteuid() == 0 and link_root.stat().st_mode & 0o005 != 0o005:  # a worker's uid may be another
        link_root.chmod(0o755)
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
    #: who the sandbox's root was on the host (:meth:`.isolation.Identity.describe`)
    identity: str = ""
    #: evidence that the candidate forged a verdict (empty when none was found)
    forged: str = ""
    #: why the channel holds no result (the worker died, the record is cut off...)
    channel_problem: str = ""

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


class _Drain:
    """Reads a pipe to its end in a thread (a worker never blocks on a full pipe), keeping at most ``cap``
    bytes: past it, the head is dropped."""

    def __init__(self, stream: IO[bytes] | int, cap: int = OUTPUT_CAP) -> None:
        self.fd = stream if isinstance(stream, int) else stream.fileno()
        self._keep = stream
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.thread = threading.Thread(target=self._run, daemon=True, name="ks-drain")
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    return
                self.chunks.append(chunk)
                self.size += len(chunk)
                while self.size > self.cap and len(self.chunks) > 1:
                    self.size -= len(self.chunks.pop(0))
                    self.overflow = True
        except OSError:
            return

    def data(self, wait_s: float = 5.0) -> bytes:
        self.thread.join(wait_s)
        return b"".join(self.chunks)

    def close(self) -> None:
        try:
            if isinstance(self._keep, int):
                os.close(self._keep)
            else:
                self._keep.close()
        except OSError:
            pass


def _send(proc: subprocess.Popen[bytes], line: bytes, *, last: bool) -> None:
    """Write one line to the worker's stdin (a dead worker is found out by the caller)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(line)
        proc.stdin.flush()
        if last:
            proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


@dataclass
class _Started:
    """A running worker: its process, the result channel's read end, its output."""

    proc: subprocess.Popen[bytes]
    workdir: Path
    mode: str
    channel: _Drain
    output: _Drain
    result_fd: int
    identity: isolation.Identity = field(default_factory=lambda: isolation.Identity(isolation.CALLER))
    started: float = field(default_factory=time.monotonic)


def _spawn(args: list[str], workdir: Path, env_extra: dict[str, str] | None, *, files: list[str],
           command_prefix: list[str] | None, writable: list[str], loopback: bool = False,
           entry_at: Path | None = None) -> _Started:
    """Start a worker whose result channel is a fresh pipe (its write end inherited, nothing else).
    ``entry_at``: where the worker sees its build-cache entry (a copy in its work folder)."""
    read_end, write_end = os.pipe()
    (workdir / ENTRY_COPY).mkdir(exist_ok=True)
    if entry_at is not None:  # the cache around the entry is seen read-only (nothing of it is hidden)
        files = [*files, str(entry_at.parent)]
    try:
        cmd, env, mode, who = _command([*args, "--result-fd", str(write_end)], workdir, env_extra, files=files,
                                  command_prefix=command_prefix, writable=writable, close_fds=[write_end],
                                  loopback=loopback,
                                  binds=[(str(workdir / ENTRY_COPY), str(entry_at))] if entry_at else [])
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(write_end,))
    except BaseException:
        os.close(read_end)
        shutil.rmtree(workdir, ignore_errors=True)  # made for this worker alone (a path it cannot read, ...)
        raise
    finally:
        os.close(write_end)  # only the worker holds it now: the channel ends when the worker does
    assert proc.stdout is not None
    return _Started(proc, workdir, mode, _Drain(read_end), _Drain(proc.stdout), write_end, who)


@dataclass
class _Ready:
    """A worker started ahead of its job (``worker --ready``): torch imported, waiting for a request."""

    started: _Started
    when: float


_READY: dict[str, _Ready] = {}
_READY_LOCK = threading.Lock()
#: env_extra entries that differ per candidate: the ready worker gets them with its request
PER_JOB_ENV = ("TORCH_EXTENSIONS_DIR", "KERNELSKILL_HARNESS_CUBIN_CACHE", "TRITON_CACHE_DIR")


def _start_ready(key: str, env_extra: dict[str, str], writable: list[str], entry_at: Path | None) -> None:
    """Start the worker that the next job of ``key`` will take (one per key; the old one, if any, stays).
    Its sandbox is made before the candidate is known: the build-cache entry is copied into its work
    folder with the job (it sees it at ``entry_at``, the same path for every key)."""
    with _READY_LOCK:
        old = _READY.get(key)
        if old is not None and old.started.proc.poll() is None:
            return
        workdir = Path(tempfile.mkdtemp(prefix="ks-worker-"))
        shared = {k: v for k, v in env_extra.items() if k not in PER_JOB_ENV}
        started = _spawn(["--ready", str(workdir)], workdir, shared, files=[], command_prefix=None,
                         writable=writable, entry_at=entry_at)
        _READY[key] = _Ready(started, time.monotonic())


def _take_ready(key: str) -> _Started | None:
    with _READY_LOCK:
        ready = _READY.pop(key, None)
    if ready is not None and ready.started.proc.poll() is None:
        return ready.started
    if ready is not None:
        _discard(ready.started)
    return None


def _discard(started: _Started) -> None:
    _kill_group(started.proc)
    started.channel.close()
    started.output.close()
    shutil.rmtree(started.workdir, ignore_errors=True)


def _cuda_go(key: str) -> None:
    """Tell the waiting worker of ``key`` that no timed run is going on: it may bring CUDA up."""
    with _READY_LOCK:
        ready = _READY.get(key)
    if ready is not None:
        _send(ready.started.proc, b"cuda\n", last=False)


def stop_ready_workers() -> None:
    """End every waiting worker (they run no candidate code; called at exit)."""
    with _READY_LOCK:
        items = list(_READY.values())
        _READY.clear()
    for ready in items:
        _discard(ready.started)


atexit.register(stop_ready_workers)


def _command(args: list[str], workdir: Path, env_extra: dict[str, str] | None, *, files: list[str],
             command_prefix: list[str] | None, writable: list[str], close_fds: list[int],
             loopback: bool = False, binds: list[tuple[str, str]] | None = None,
             ) -> tuple[list[str], dict[str, str], str, isolation.Identity]:
    """(command line, environment, isolation, identity) of a worker in ``workdir`` with worker arguments
    ``args``. The profiler (``command_prefix``) runs inside the sandbox too, with the worker as its child.
    A path the sandbox's user cannot read is the machine's problem: :class:`.preflight.HarnessUnavailable`,
    one line naming it."""
    env = scrub_env(extra=env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_pythonpath(), env.get("PYTHONPATH", "")) if p)
    env["HOME"] = str(workdir)  # nothing of the user's home (configs, tokens) is in reach
    env["TMPDIR"] = str(workdir)
    cmd = [*(command_prefix or []), sys.executable, "-m", "kernelskill.pipeline.harness.worker", *args]
    mode = isolation.available()
    who = isolation.Identity(isolation.CALLER)
    if mode == isolation.NAMESPACES:
        who = isolation.sandbox_identity()
        try:
            cmd = isolation.wrap(cmd, workdir=workdir, env=env,
                                 read_only=[*files, *(command_prefix or [])[:1]],
                                 writable=[str(Path(w).expanduser()) for w in writable], close_fds=close_fds,
                                 loopback=loopback, binds=binds, identity=who)
        except isolation.Unreachable as exc:
            raise HarnessUnavailable(str(exc)) from None
    return cmd, env, mode, who


#: the parts of a build-cache entry (``CACHE_ROOT/<key>/``) a worker reads and writes
ENTRY_PARTS = ("ext", "cubin", "triton")
#: where, inside the sandbox, a worker sees its entry (a copy in its work folder): one path for every key,
#: so a build's absolute paths (ninja files) are the same for the builder and the evaluation
ENTRY_MOUNT = ".entry"
ENTRY_COPY = "entry"
#: an entry larger than this is not kept in the cache (a candidate that fills its build folder)
ENTRY_CAP = 4 * 2**30


def entry_env(base: Path) -> dict[str, str]:
    """The build folders of an entry seen at ``base``: torch extensions, fast-path cubins, Triton's cache."""
    return {"TORCH_EXTENSIONS_DIR": str(base / "ext"), "KERNELSKILL_HARNESS_CUBIN_CACHE": str(base / "cubin"),
            "TRITON_CACHE_DIR": str(base / "triton")}


def copy_tree(src: Path, dst: Path, cap: int = ENTRY_CAP, *, owner: int | None = None) -> int:
    """Copy the plain files and folders of ``src`` into ``dst`` (links, devices and pipes are left out);
    returns the bytes copied, or -1 past ``cap`` (what was copied stays: the caller removes it). The copies
    keep no set-user-ID, set-group-ID or sticky bit (the parent may be root: a worker's file must not become
    a root program). ``owner``: only files of that uid are copied (the worker's own output when it ran as
    that uid: never a hard link it made to a file of root's)."""
    total = 0
    for folder, dirs, files in os.walk(src, followlinks=False):
        rel = Path(folder).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        for name in files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or (owner is not None and st.st_uid != owner):
                continue
            total += st.st_size
            if total > cap:
                return -1
            shutil.copy2(path, dst / rel / name, follow_symlinks=False)
            if stat.S_IMODE(st.st_mode) & ~0o777:
                os.chmod(dst / rel / name, stat.S_IMODE(st.st_mode) & 0o777)
    return total


def _entry_in(entry: Path, workdir: Path) -> None:
    for part in ENTRY_PARTS:
        if (entry / part).is_dir():
            copy_tree(entry / part, workdir / ENTRY_COPY / part)


def _entry_out(workdir: Path, entry: Path, owner: int | None = None) -> bool:
    """The builder's output becomes the entry (the parent writes the cache; no worker does). ``owner``: the
    host uid the worker ran as, when not the parent's (the copies are the parent's own)."""
    ok = True
    for part in ENTRY_PARTS:
        shutil.rmtree(entry / part, ignore_errors=True)
        src = workdir / ENTRY_COPY / part
        if src.is_dir() and copy_tree(src, entry / part, owner=owner) < 0:
            ok = False
    if not ok:
        for part in ENTRY_PARTS:
            shutil.rmtree(entry / part, ignore_errors=True)
    return ok


def _worker_log(path: Path, owner: int | None, limit: int = 200_000) -> bytes | None:
    """The tail of a log the worker wrote in its folder: a plain file (never a link the candidate put there to
    a file the parent may read and it may not), of the worker's own uid when it ran as another."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (owner is not None and st.st_uid != owner):
            return None
        fh.seek(max(0, st.st_size - limit))
        return fh.read(limit)


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
    cache_entry: Path | None = None,
    export_entry: bool = False,
    writable: list[str] | None = None,
) -> WorkerOutcome:
    """Run the worker on ``request`` and return its result (or why there is none).

    ``command_prefix`` wraps the interpreter (the profiler puts ``ncu ...`` there; it runs inside the
    sandbox with the worker). With ``ready_key`` the job goes to a worker of that key started ahead of
    it (torch imported, CUDA up) when one is waiting, and the next one is started at once: a fresh
    process per job all the same. The key must name everything of ``env_extra`` but :data:`PER_JOB_ENV`
    and ``writable``.

    ``cache_entry`` (``CACHE_ROOT/<key>``): the candidate's build-cache entry. Inside the namespaces the
    worker gets a copy of it in its work folder, seen at ``CACHE_ROOT/.entry``; with ``export_entry`` (the
    build step) the copy becomes the entry once the worker has ended with a valid record. No worker
    writes the cache itself. ``writable``: further folders the worker may write (the builder's per-box
    folders). Process-only isolation cannot hide anything: the worker writes the entry in place.
    """
    mode_now = isolation.available()
    entry_at = None
    env_extra = dict(env_extra or {})
    if cache_entry is not None:
        cache_entry.mkdir(parents=True, exist_ok=True)
        entry_at = cache_entry.parent / ENTRY_MOUNT if mode_now == isolation.NAMESPACES else None
        if entry_at is not None:
            entry_at.mkdir(exist_ok=True)
        env_extra.update(entry_env(entry_at or cache_entry))
    writable = list(writable or [])
    started = _take_ready(ready_key) if ready_key and command_prefix is None else None
    from_ready = started is not None
    nonce = secrets.token_hex(16)
    if started is not None:  # its sandbox was made before the files were known: they come along in workdir
        request = dict(request)
        for name in ("task", "candidate"):
            if isinstance(request.get(name), str) and Path(request[name]).is_file():
                copy = started.workdir / f"{name}{Path(request[name]).suffix}"
                shutil.copyfile(request[name], copy)
                isolation.hand_over(copy, started.identity.outer)
                request[name] = str(copy)
        request["env"] = {k: v for k, v in env_extra.items() if k in PER_JOB_ENV}
        if cache_entry is not None and entry_at is not None:
            _entry_in(cache_entry, started.workdir)
        # what was copied in is the sandbox's (not the spec: its launcher may not have read it yet)
        isolation.hand_over(started.workdir / ENTRY_COPY, started.identity.outer)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="ks-worker-"))
        if cache_entry is not None and entry_at is not None:
            _entry_in(cache_entry, workdir)
        files = [str(request[k]) for k in ("task", "candidate") if isinstance(request.get(k), str)]
        started = _spawn([], workdir, env_extra, files=files, command_prefix=command_prefix, writable=writable,
                         loopback=command_prefix is not None, entry_at=entry_at)
    if ready_key and command_prefix is None:  # imports torch while this job runs; CUDA waits
        _start_ready(ready_key, env_extra, writable, entry_at)
    proc, workdir, mode = started.proc, started.workdir, started.mode
    # the job (with its nonce) goes through the worker's stdin: never on disk, never in the environment
    _send(proc, (json.dumps(dict(request, nonce=nonce)) + "\n").encode(), last=True)
    start = time.monotonic()
    timed_out = rss_killed = False
    peak = 0.0
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
    returncode = isolation.worker_returncode(proc.returncode, mode)
    data = started.channel.data()
    raw = started.output.data()
    started.channel.close()
    started.output.close()
    reading = channel.read(data, nonce, mode=str(request.get("mode")),
                           config=request.get("config") if isinstance(request.get("config"), dict) else None)
    output = raw.decode("utf-8", "replace")
    log_tail = _worker_log(workdir / channel.WORKER_LOG, started.identity.outer)
    if log_tail is not None:  # the profiled worker's own output (the profiler's alone is ``output``)
        raw += b"\n" + log_tail
    text = raw.decode("utf-8", "replace")
    forged = reading.forged
    found = channel.forged_files(workdir)
    if found:
        forged = forged or f"{', '.join(found[:3])} written into the work folder"
    printed = channel.printed_verdict(text)
    if printed and not forged:
        forged = printed
    stage = reading.stages[-1] if reading.stages else ""
    extra: dict[str, Any] = {"output": output} if full_output else {}
    if export_entry and cache_entry is not None and entry_at is not None and reading.result is not None \
            and not forged and not (timed_out or rss_killed):
        extra["entry_kept"] = _entry_out(workdir, cache_entry, started.identity.outer)
    if not keep_workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    outcome = WorkerOutcome(result=reading.result if not forged else None, returncode=returncode,
                            timed_out=timed_out, rss_killed=rss_killed, seconds=seconds, stage=stage,
                            stderr_tail=text[-4000:], peak_rss_mb=round(peak, 1), extra=extra, isolation=mode,
                            identity=started.identity.describe(), forged=forged, channel_problem=reading.problem)
    log.debug("worker %s: rc=%s %.1fs stage=%s isolation=%s ready=%s forged=%s", request.get("mode"), returncode,
              seconds, stage, mode, from_ready, forged or "-")
    return outcome
