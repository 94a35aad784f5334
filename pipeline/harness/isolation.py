"""Isolate a harness worker from the user's session: no secret in reach, no network.

The property (not a deny list): whatever a candidate does, it cannot read a secret of the session that
started it (the environment of any kernelskill process, the real home folder, the config file) and it
cannot reach the network. Mechanism, strongest first:

``namespaces``
    The worker is started through ``unshare --user --map-root-user --pid --fork --mount --net
    --mount-proc`` and this module's launcher (``python -m kernelskill.pipeline.harness.isolation SPEC``),
    with the scrubbed environment, so *every* process of the sandbox (launcher, worker, whatever the
    candidate starts) holds no secret in its environ. The new PID namespace with its own ``/proc``
    shows only the sandbox's processes (no parent to read ``/proc/<pid>/environ`` of). The launcher
    mounts an empty tmpfs over the real home folder, the kernelskill home, ``/run`` (service sockets)
    and the other configured places, gives the sandbox its own empty ``/tmp``, ``/var/tmp`` and
    ``/dev/shm`` (nothing to read from or plant for other processes), bind-mounts back (read-only) only what the worker needs (the
    Python installation, this package, the task and the candidate) and the work and build-cache folders
    (writable), hides a ``kernelskill.toml`` in the starting folder behind an empty file, then drops
    every capability (bounding set included, no_new_privs) so the candidate can neither undo a mount
    nor configure the network namespace, whose only interface (loopback) is down: no connection goes
    anywhere, 127.0.0.1 included.

``process-only``
    Where user namespaces are not available (no ``unshare``, disabled by the kernel or a security
    module): scrubbed environment, temporary HOME, own process group and limits, nothing more. Every
    result then carries ``isolation: process-only`` and a warning is logged.

``KERNELSKILL_HARNESS_ISOLATION=namespaces|process`` forces one (``namespaces`` fails loudly when it
cannot run). Standard library only (ctypes for mount(2) and prctl(2)).
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

NAMESPACES = "namespaces"
PROCESS_ONLY = "process-only"
ENV_FORCE = "KERNELSKILL_HARNESS_ISOLATION"
#: extra folders or files to hide (os.pathsep-separated), e.g. a ``--home`` outside the home folder
ENV_HIDE = "KERNELSKILL_HARNESS_HIDE"
STATUS_FILE = "sandbox.status.json"
#: shared scratch folders: each sandbox gets its own empty one (nothing planted by or for another process)
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
WARNING = ("isolation: process-only (user namespaces are not available here, so a candidate can read "
           "what this user can read and reach the network)")

UNSHARE_ARGS = ["--user", "--map-root-user", "--pid", "--fork", "--mount", "--net", "--mount-proc",
                "--propagation", "private"]

# mount(2) / umount2(2) / prctl(2) constants (linux/fs.h, linux/prctl.h)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
MNT_DETACH = 2
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


# ------------------------------------------------------------------------------------ parent side
def hidden_paths(cwd: Path | None = None) -> tuple[list[str], list[str]]:
    """``(folders, files)`` that hold the user's secrets: the home folder (as the environment and the
    password database name it), the kernelskill home, XDG config, ``/root``, ``/run``; and a
    ``kernelskill.toml`` in the current folder (the config is read from there too)."""
    folders: list[str] = []
    candidates = [os.environ.get("HOME"), os.environ.get("KERNELSKILL_HOME"), os.environ.get("XDG_CONFIG_HOME"),
                  os.environ.get("XDG_RUNTIME_DIR"), "/root", "/run"]
    try:
        candidates.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # pragma: no cover - a uid without a passwd entry
        pass
    candidates.extend(p for p in os.environ.get(ENV_HIDE, "").split(os.pathsep) if p)
    files: list[str] = []
    for raw in candidates:
        if not raw:
            continue
        path = os.path.realpath(raw)
        if path == "/" or not os.path.exists(path):
            continue
        (folders if os.path.isdir(path) else files).append(path)
    toml = os.path.realpath(os.path.join(str(cwd or os.getcwd()), "kernelskill.toml"))
    if os.path.isfile(toml):
        files.append(toml)
    return sorted(set(folders)), sorted(set(files))


def needed_paths() -> list[str]:
    """What the worker must still read: the interpreter, its prefixes and every import path of this
    process (the package, a venv, an editable install), CUDA's home."""
    out = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                          os.path.dirname(os.path.realpath(sys.executable)))}
    out.update(os.path.realpath(p) for p in sys.path if p and os.path.exists(p))
    out.add(str(Path(__file__).resolve().parents[2]))  # this package's root
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            out.add(os.path.realpath(os.environ[var]))
    return sorted(p for p in out if os.path.exists(p))


def _unshare() -> str | None:
    return shutil.which("unshare") or next((p for p in ("/usr/bin/unshare", "/bin/unshare") if os.path.exists(p)),
                                           None)


def wrap(cmd: list[str], *, workdir: Path, env: dict[str, str], read_only: list[str],
         writable: list[str]) -> list[str]:
    """The command line that runs ``cmd`` inside the namespaces (the spec is written into ``workdir``)."""
    folders, files = hidden_paths()
    nvidia = [str(p) for p in Path("/run").glob("nvidia*")] if Path("/run").is_dir() else []
    # the package's link folder, and the tools and libraries the worker's environment points to (nvcc,
    # ninja, CUDA libraries may live under the home folder)
    imports = [p for var in ("PYTHONPATH", "PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "CUDA_HOME")
               for p in env.get(var, "").split(os.pathsep) if p]
    scratch = sorted({os.path.realpath(p) for p in SCRATCH if os.path.isdir(p)} - set(folders))
    hidden = set(folders) | set(files)

    def kept(paths: list[str]) -> list[str]:
        # a kept path that IS a hidden folder (the home folder on sys.path, PATH=...:$HOME) would undo the
        # hiding: it is dropped; what the worker needs inside it is kept by its own, deeper path
        out = {os.path.realpath(p) for p in paths if os.path.exists(p)}
        return sorted(p for p in out if p not in hidden)

    spec = {"hide_dirs": folders, "scratch_dirs": scratch, "hide_files": files,
            "read_only": kept([*needed_paths(), *read_only, *nvidia, *imports]),
            "writable": sorted({*kept(writable), os.path.realpath(workdir)}),
            "status": str(workdir / STATUS_FILE), "cwd": str(workdir), "cmd": cmd}
    spec_path = workdir / "sandbox.spec.json"
    spec_path.write_text(json.dumps(spec))
    unshare = _unshare()
    assert unshare is not None
    return [unshare, *UNSHARE_ARGS, "--", sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(spec_path)]


@functools.lru_cache(maxsize=1)
def available() -> str:
    """Which isolation this machine offers (probed once per process by running the launcher)."""
    forced = os.environ.get(ENV_FORCE, "").strip().lower()
    if forced in ("process", PROCESS_ONLY, "none"):
        return PROCESS_ONLY
    problem = _probe()
    if problem is None:
        return NAMESPACES
    if forced == NAMESPACES:
        raise RuntimeError(f"{ENV_FORCE}=namespaces, but the sandbox does not start here: {problem}")
    log.warning("%s; reason: %s", WARNING, problem)
    return PROCESS_ONLY


def _probe() -> str | None:
    if sys.platform != "linux":
        return "not Linux"
    if _unshare() is None:
        return "no unshare program (util-linux)"
    workdir = Path(tempfile.mkdtemp(prefix="ks-sandbox-probe-"))
    try:
        cmd = wrap([sys.executable, "-I", "-S", "-c", "import os; print(len(os.listdir('/proc')))"],
                   workdir=workdir, env={}, read_only=[], writable=[])
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=workdir,
                                  env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare failed: {exc}"
        if proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
            return f"unshare failed: {last[:200]}"
        return None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def read_status(workdir: Path) -> int | None:
    """The worker's return code as the launcher saw it (negative: killed by that signal)."""
    try:
        return int(json.loads((workdir / STATUS_FILE).read_text())["returncode"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ----------------------------------------------------------------------------- inside the sandbox
def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


def _mount(libc: Any, src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    rc = libc.mount(src.encode() if src else None, target.encode(), fstype.encode() if fstype else None, flags,
                    ctypes.c_char_p(data.encode()) if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} -> {target}: {os.strerror(err)}")


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _make_point(path: str, like: str) -> None:
    """Create a mount point at ``path`` of the same kind (folder or file) as ``like``."""
    if os.path.isdir(like):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            with open(path, "w"):
                pass


def _drop_privileges(libc: Any) -> None:
    """No capability is left (bounding set, ambient, effective/permitted/inheritable) and exec cannot
    gain one back: the candidate can neither unmount what hides the user's files nor touch the network."""
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability: ignored

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header = Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (Data * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")


def _remount_read_only(libc: Any, path: str) -> None:
    """Make a bind mount read-only, keeping the flags the original mount has locked (nodev, noexec...);
    where the kernel still refuses, the path stays writable (it is the user's own code, not a secret)."""
    st = os.statvfs(path).f_flag
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | (st & (MS_NODEV | 8 | 1024 | 2048))
    if st & 4096:  # ST_RELATIME
        flags |= 1 << 21
    try:
        _mount(libc, None, path, None, flags)
    except OSError as exc:
        log.warning("sandbox: %s stays writable (%s)", path, exc.strerror)


def setup(spec: dict[str, Any]) -> None:
    """Hide the secrets' folders behind empty tmpfs mounts and bring back only what the worker needs.

    Kept paths that lie in a hidden folder are opened (``O_PATH``) before anything is hidden and bound
    back from ``/proc/self/fd`` afterwards. Hiding and bringing back run in order of path depth, so a
    hidden folder inside a kept one (a kernelskill home inside the repository) is hidden again, and a
    kept file inside that (the task of a run) comes back again.
    """
    libc = _libc()
    scratch = set(spec.get("scratch_dirs", []))
    hide_dirs = [*spec["hide_dirs"], *sorted(scratch)]
    keeps = {p: True for p in spec["read_only"]} | {p: False for p in spec["writable"]}
    fds: dict[str, int] = {}
    for path in keeps:
        if any(_under(path, d) for d in hide_dirs):
            try:
                fds[path] = os.open(path, os.O_PATH)
            except OSError as exc:  # gone since the spec was written (a test's temporary folder on sys.path)
                log.warning("sandbox: %s is not kept (%s)", path, exc.strerror)
    steps = [(d.count("/"), 0, d) for d in hide_dirs] + [(p.count("/"), 1, p) for p in fds]
    for _depth, kind, path in sorted(steps):
        if kind == 0:
            if os.path.isdir(path):
                options = "size=1g,mode=1777" if path in scratch else "size=4m,mode=0755"
                _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
            continue
        if not any(_under(path, d) for _dd, k, d in steps if k == 0 and d.count("/") <= path.count("/")):
            continue
        source = f"/proc/self/fd/{fds[path]}"
        try:
            _make_point(path, source)
            _mount(libc, source, path, None, MS_BIND | MS_REC)
        except OSError as exc:  # the worker fails later, naming what it could not reach, if it needed this
            log.warning("sandbox: %s could not be bound back (%s)", path, exc.strerror)
            continue
        if keeps[path]:
            _remount_read_only(libc, path)
    for fd in fds.values():
        os.close(fd)
    for f in spec["hide_files"]:
        if f not in keeps and os.path.isfile(f):
            _mount(libc, "/dev/null", f, None, MS_BIND)
    _drop_privileges(libc)


def launch(spec_path: str) -> int:
    """PID 1 of the sandbox: set up, run the worker, record how it ended, exit. Nothing configures logging
    in this process: its warnings reach stderr (the worker's channel, which the harness keeps) through
    logging's last-resort handler, message only."""
    spec = json.loads(Path(spec_path).read_text())
    try:
        setup(spec)
    except OSError as exc:
        log.error("sandbox setup failed: %s (set %s=process to run without the namespaces)", exc, ENV_FORCE)
        return 125
    os.chdir(spec["cwd"])
    pid = os.fork()
    if pid == 0:  # the worker (its environment is the launcher's: already scrubbed by the parent)
        try:
            os.execv(spec["cmd"][0], spec["cmd"])
        finally:
            os._exit(127)
    code = 0
    while True:  # as PID 1, reap every orphan until the worker itself ends
        try:
            done, status = os.wait()
        except ChildProcessError:
            break
        if done == pid:
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            break
    tmp = spec["status"] + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"returncode": code}, fh)
    os.replace(tmp, spec["status"])
    return 0 if code == 0 else (code if code > 0 else 128 - code)


if __name__ == "__main__":
    sys.exit(launch(sys.argv[1]))
