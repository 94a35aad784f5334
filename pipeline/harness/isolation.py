"""Isolate a harness worker: no secret in reach, nothing of the host writable, no network, no host socket.

The property (not a deny list): whatever a candidate does, it cannot read a secret of the session that
started it (the environment of any kernelskill process, the home folders, every settings file, ``.env``
files, credential folders), it cannot change anything outside its own scratch folder (the package that
judges it, the user's settings, the build cache, ``/etc``, ``/usr/local``, ``/opt``, ``/srv``...), and it
cannot reach the network or a service's Unix socket. Mechanism, strongest first:

``namespaces``
    The worker is started through ``unshare --user --map-root-user --pid --fork --mount --net
    --mount-proc`` and this module's launcher (``python -I -S isolation.py SPEC``), with the scrubbed
    environment, so *every* process of the sandbox holds no secret in its environ and sees only the
    sandbox's processes. The launcher (PID 1 of the sandbox, with every capability of its own user
    namespace until it drops them):

    1. opens the paths it must bring back (``O_PATH``) before anything is hidden;
    2. makes the **whole mount tree read-only** (``mount_setattr(2)`` with ``AT_RECURSIVE`` and
       ``MOUNT_ATTR_RDONLY``; on an older kernel each mount of ``/proc/self/mountinfo`` is remounted
       read-only): the checkout of this package, the virtual environment, ``/etc``, ``/usr``, ``/opt``,
       ``/srv``, everything;
    3. puts an empty read-only tmpfs over the folders that hold secrets (the home folders, the
       kernelskill home and every ``--home`` registered with :func:`protect`, XDG config, ``/root``,
       ``/run``), and ``/dev/null`` over the settings and secret files of the starting folder
       (``kernelskill.toml``, ``.env``, ``.env.*``, ``.netrc``...);
    4. gives the sandbox its own empty ``/tmp``, ``/var/tmp`` and ``/dev/shm``;
    5. binds back what the worker needs: read-only (the task, the candidate, import paths that were
       hidden), and writable only the worker's own scratch folder and the build-cache folders of the
       candidate's own key;
    6. drops every capability (bounding set included) and sets ``no_new_privs``.

    The network namespace has only a loopback interface, down (up only for the profiler, which talks to
    its target through it: still nothing outside the sandbox). Path Unix sockets are refused by a
    seccomp filter (:func:`deny_unix_sockets`, ``socket(AF_UNIX)`` fails with EPERM, ``socketpair``
    works) that the worker installs before it imports the candidate, for every thread.

    When kernelskill runs as root, the sandbox's root would be the real root (without capabilities, but the
    owner of every root-only file): the launcher is then started as ``python -I -S isolation.py --map-to
    65534 SPEC`` and maps the user namespace itself (:func:`launch_mapped`), so that the sandbox's root is
    uid and gid 65534 (nobody) on the host; its work folder is handed over to that uid first
    (:func:`hand_over`), and the folders it could not pass through are hidden with what it needs bound back
    (:func:`reachable`). Where the map cannot be written, the probe falls back to the root mapping, with a
    warning; :func:`sandbox_identity` says which ran.

``process-only``
    Where user namespaces are not available (no ``unshare``, disabled by the kernel or a security
    module): scrubbed environment, temporary HOME, own process group and limits, and the seccomp filter.
    Every result then carries ``isolation: process-only``; ``optimize`` and ``bench run`` refuse to run
    candidates so unless ``--allow-weak-isolation`` is given.

``KERNELSKILL_HARNESS_ISOLATION=namespaces|process`` forces one (``namespaces`` fails loudly when it
cannot run). Standard library only (ctypes for mount(2), mount_setattr(2), prctl(2), seccomp(2)).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import fcntl
import functools
import json
import logging
import os
import platform
import pwd
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

NAMESPACES = "namespaces"
PROCESS_ONLY = "process-only"
ENV_FORCE = "KERNELSKILL_HARNESS_ISOLATION"
#: extra folders or files to hide (os.pathsep-separated), e.g. a ``--home`` outside the home folder
ENV_HIDE = "KERNELSKILL_HARNESS_HIDE"
#: shared scratch folders: each sandbox gets its own empty one (nothing planted by or for another process)
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
#: settings and secret files of the starting folder (and of every home folder): never visible to a worker
SECRET_FILES = ("kernelskill.toml", ".env", ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass")
#: credential folders, wherever they sit (the starting folder or a home folder)
SECRET_DIRS = (".ssh", ".aws", ".gnupg", ".docker", ".kube", ".azure", ".config/gcloud", ".kernelskill")
WARNING = ("isolation: process-only (user namespaces are not available here, so a candidate can read "
           "what this user can read, write what this user can write and reach the network)")

UNSHARE_ARGS = ["--user", "--map-root-user", "--pid", "--fork", "--mount", "--net", "--mount-proc",
                "--propagation", "private"]
#: the host uid and gid the sandbox's root becomes when kernelskill itself runs as root (nobody and nogroup):
#: a candidate then reads only what any user of the machine may read, never a root-only file
UNPRIVILEGED_ID = 65534
#: another unprivileged id for that (one that no program of the machine runs as, where something runs as nobody)
ENV_SANDBOX_ID = "KERNELSKILL_HARNESS_SANDBOX_ID"
#: who the sandbox's root is on the host (``Identity.name``): the caller's own uid (kernelskill does not run as
#: root, or process-only isolation), the unprivileged id, or root without capabilities (the fallback)
CALLER, UNPRIVILEGED, ROOT = "caller", "unprivileged", "root"
#: where the NVIDIA driver says whether GPU performance counters are for administrators only
NVIDIA_PARAMS = "/proc/driver/nvidia/params"

# unshare(2) and prctl(2) flags of the launcher that maps the sandbox's root itself (kernelskill as root)
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_PRIVATE, PR_SET_PDEATHSIG = 1 << 18, 1

# mount(2) / umount2(2) / prctl(2) constants (linux/fs.h, linux/prctl.h)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# mount_setattr(2): the same number on every architecture (the unified syscall table from 424 on)
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1

_PROTECTED: set[str] = set()
_PROTECTED_LOCK = threading.Lock()


def protect(*paths: str | os.PathLike[str]) -> None:
    """Hide these folders or files from every worker started by this process from now on (the settings'
    home folder of a ``--home`` run: its ``kernelskill.toml`` holds the API key)."""
    with _PROTECTED_LOCK:
        _PROTECTED.update(os.path.realpath(os.path.expanduser(str(p))) for p in paths if str(p))


# ------------------------------------------------------------------------------------ parent side
def _home_folders() -> list[str]:
    homes = [os.environ.get("HOME"), "/root"]
    try:
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # pragma: no cover - a uid without a passwd entry
        pass
    return [h for h in homes if h]


def hidden_paths(cwd: Path | None = None) -> tuple[list[str], list[str]]:
    """``(folders, files)`` that hold the user's secrets or settings: the home folders (as the environment
    and the password database name them), the kernelskill home and every protected path, XDG config,
    ``/root``, ``/run``; the settings, ``.env`` and credential files and folders of the starting folder."""
    start = str(cwd or os.getcwd())
    candidates = [*_home_folders(), os.environ.get("KERNELSKILL_HOME"), os.environ.get("XDG_CONFIG_HOME"),
                  os.environ.get("XDG_RUNTIME_DIR"), "/run"]
    candidates.extend(p for p in os.environ.get(ENV_HIDE, "").split(os.pathsep) if p)
    with _PROTECTED_LOCK:
        candidates.extend(_PROTECTED)
    for base in (start, *_home_folders()):
        candidates.extend(os.path.join(base, d) for d in SECRET_DIRS)
        candidates.extend(os.path.join(base, f) for f in SECRET_FILES)
        try:
            candidates.extend(os.path.join(base, n) for n in os.listdir(base) if n.startswith(".env."))
        except OSError:
            pass
    folders: list[str] = []
    files: list[str] = []
    for raw in candidates:
        if not raw:
            continue
        path = os.path.realpath(os.path.expanduser(raw))
        if path == "/" or not os.path.exists(path):
            continue
        if os.path.isdir(path):
            if os.path.basename(path) != ".env":  # a virtual environment named .env is not a secret file
                folders.append(path)
        else:
            files.append(path)
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


@functools.lru_cache(maxsize=4)
def _configured_id(raw: str) -> int:
    if raw.isdigit() and 0 < int(raw) < 2**32 - 1:
        return int(raw)
    log.warning("%s=%r is not a uid above 0: the sandbox uses %d", ENV_SANDBOX_ID, raw, UNPRIVILEGED_ID)
    return UNPRIVILEGED_ID


def outer_id() -> int | None:
    """The host uid and gid the sandbox's root is mapped to by this module's own launcher: None where
    kernelskill does not run as root (``unshare --map-root-user`` maps it to the caller's own uid), else
    :data:`UNPRIVILEGED_ID` (or ``KERNELSKILL_HARNESS_SANDBOX_ID``)."""
    if os.geteuid() != 0 or root_kept_by_choice():
        return None
    raw = os.environ.get(ENV_SANDBOX_ID, "").strip()
    return _configured_id(raw) if raw else UNPRIVILEGED_ID


def root_kept_by_choice() -> bool:
    """``KERNELSKILL_HARNESS_SANDBOX_ID=root`` as root: the user keeps the root mapping (a machine where the
    unprivileged uid cannot reach the GPU or the toolchain); every result says so, as with the fallback."""
    return os.geteuid() == 0 and os.environ.get(ENV_SANDBOX_ID, "").strip().lower() == "root"


def counters_admin_only(params: str = NVIDIA_PARAMS) -> bool:
    """Whether the NVIDIA driver restricts GPU performance counters to administrators
    (``RmProfilingAdminOnly: 1``; no driver file: not restricted). The driver decides that by capability,
    not by uid (its administrator test is ``capable(CAP_SYS_ADMIN)``, its profiling one ``CAP_PERFMON``, both
    of the host's namespace), so Nsight Compute inside a sandbox, which holds no capability, fails with
    ERR_NVGPUCTRPERM whoever the sandbox's root is: the profiler gets the same unprivileged identity as
    every worker, and the profile says why it has no counters."""
    try:
        text = Path(params).read_text(errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "RmProfilingAdminOnly":
            return value.strip() not in ("", "0")
    return False


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who the sandbox's root is on the host. ``outer``: the uid and gid this module's launcher maps it to
    (None: ``unshare --map-root-user``, the caller's own uid); ``reason``: why root stays root."""

    name: str
    outer: int | None = None
    reason: str = ""

    def describe(self) -> str:
        if self.name == UNPRIVILEGED:
            return f"unprivileged (uid {self.outer} on the host, since kernelskill runs as root)"
        if self.name == ROOT:
            return f"root without capabilities ({self.reason})"
        return f"the caller's own uid {os.geteuid()}"


#: why the probe could not map the sandbox's root to the unprivileged id (empty: it could, or it did not try)
_fallback = ""


def sandbox_identity() -> Identity:
    """The identity a worker's sandbox gets on this machine (the profiler's too: see
    :func:`counters_admin_only`)."""
    if available() != NAMESPACES:
        return Identity(CALLER)
    if root_kept_by_choice():
        return Identity(ROOT, reason=f"{ENV_SANDBOX_ID}=root: candidates can read root-only files outside the "
                                     "hidden folders")
    outer = outer_id()
    if outer is None:
        return Identity(CALLER)
    if _fallback:
        return Identity(ROOT, reason=f"the unprivileged uid {outer} could not be set up here: {_fallback}")
    return Identity(UNPRIVILEGED, outer)


def hand_over(path: str | os.PathLike[str], outer: int | None) -> None:
    """Give a folder of the sandbox's own (its work folder, a build folder it writes) and what the parent put
    in it to the sandbox's user ``outer`` (None: nothing to do). Only what root owns changes hands, a file
    with another link never (a hard link the sandbox made to a file outside), and no link is followed (the
    tree is walked by descriptor: a folder swapped for a link meanwhile is not entered)."""
    if outer is None:
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        return
    if st.st_uid == 0:
        os.chown(path, outer, outer, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        return
    for _folder, dirs, files, dirfd in os.fwalk(path, follow_symlinks=False):
        for name in [*dirs, *files]:
            try:
                entry = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if entry.st_uid == 0 and (stat.S_ISDIR(entry.st_mode) or entry.st_nlink == 1):
                    os.chown(name, outer, outer, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                continue


class Unreachable(RuntimeError):
    """A path the worker needs that the sandbox's unprivileged user cannot read (one line, naming it)."""


def _allows(st: os.stat_result, outer: int, bits: int) -> bool:
    """Whether uid and gid ``outer`` (no other group) may do ``bits`` (4 read, 1 search) on a file of ``st``."""
    shift = 6 if st.st_uid == outer else 3 if st.st_gid == outer else 0
    return (st.st_mode >> shift) & bits == bits


def _shown_real(path: str, covered: list[str], kept: list[str]) -> bool:
    """Whether the sandbox shows the host's own folder at ``path``: no hidden or scratch folder covers it, or a
    kept path (bound back) covers it more closely. Else it is a tmpfs or a folder the launcher made (0755)."""
    cover = max((d for d in covered if _under(path, d)), key=len, default=None)
    if cover is None:
        return True
    keep = max((k for k in kept if _under(path, k)), key=len, default=None)
    return keep is not None and len(keep) > len(cover)


_WARNED: set[str] = set()


def reachable(spec: dict[str, Any], outer: int, essential: set[str]) -> list[str]:
    """Check that uid ``outer`` reaches every path of ``spec`` the worker needs; returns the folders to hide
    besides the spec's own, so that nothing is chmod-ed and nothing becomes visible that this uid could not
    see anyway. A host folder it cannot pass through (mode 0700, neither hidden nor a scratch folder) on the
    way to a kept path, and a kept folder it cannot read (a build cache made 0700), become an empty tmpfs
    with the kept paths inside bound back (such a kept folder leaves ``spec["read_only"]``). A kept file it
    cannot read raises :class:`Unreachable` when the worker cannot do without it (``essential``: the task,
    the candidate, the profiler, the interpreter's folder, this package); any other stays as it is (a
    warning, once)."""
    covered = [*spec["hide_dirs"], *spec["scratch_dirs"]]
    extra: list[str] = []
    for path in sorted(spec["read_only"]):
        try:
            st = os.stat(path)
        except OSError:
            continue
        folder = stat.S_ISDIR(st.st_mode)
        if path in spec["writable"] or _allows(st, outer, 5 if folder else 4):
            continue  # the work folder and the folders it writes are handed over (see hand_over)
        what = (f"the sandbox runs as uid {outer} (kernelskill runs as root) and cannot read {path} (mode "
                f"{stat.S_IMODE(st.st_mode):04o}, uid {st.st_uid}, gid {st.st_gid})")
        if path in essential:
            raise Unreachable(f"{what}: make it readable for other users (or set {ENV_SANDBOX_ID} to an id "
                              "that may read it)")
        if folder:
            extra.append(path)
        elif path not in _WARNED:
            _WARNED.add(path)
            log.warning("%s; a worker that needs it will fail", what)
    spec["read_only"] = [p for p in spec["read_only"] if p not in extra]
    kept = sorted({*spec["read_only"], *spec["writable"]})
    targets = [*kept, *(dst for _src, dst in spec.get("binds", []))]
    for path in sorted(targets, key=lambda p: p.count("/")):
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts)):
            folder_path = "/" + "/".join(parts[:depth])
            if folder_path in kept or not _shown_real(folder_path, [*covered, *extra], kept):
                continue
            try:
                st = os.stat(folder_path)
            except OSError:
                break
            if not _allows(st, outer, 1):
                extra.append(folder_path)
    return extra


def wrap(cmd: list[str], *, workdir: Path, env: dict[str, str], read_only: list[str],
         writable: list[str], close_fds: list[int] | None = None, loopback: bool = False,
         binds: list[tuple[str, str]] | None = None, identity: Identity | None = None) -> list[str]:
    """The command line that runs ``cmd`` inside the namespaces (the spec is written into ``workdir``).

    ``writable``: the only folders the sandbox may write besides ``workdir`` (made now if missing).
    ``close_fds``: descriptors the launcher closes once the worker runs (the result channel: only the
    worker holds it). ``loopback``: bring the sandbox's own loopback interface up (the profiler).
    ``binds``: ``(source, target)`` pairs: the writable folder ``source`` appears at ``target`` (a build-cache
    entry copied into the work folder, seen at the entry's fixed path). ``identity``: who the sandbox's
    root is on the host (default: :func:`sandbox_identity`). With an unprivileged one (kernelskill runs as
    root) ``workdir`` and ``writable`` are handed over to it, and the command is this module's own launcher,
    which maps the user namespace itself (:func:`launch_mapped`) instead of ``unshare --map-root-user``.
    Raises :class:`Unreachable` when that user cannot read a path the worker needs.
    """
    who = identity or sandbox_identity()
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
        # hiding: it is dropped; what the worker needs inside it is kept by its own, deeper path. A secret
        # file or credential folder inside a kept folder stays hidden (it is hidden after the binds). A kept
        # path that IS a scratch folder (/tmp on sys.path: pytest puts it there for a checkout under /tmp) is
        # dropped too: bound back whole (recursively, so with the sandbox's own fresh /tmp on top of it, then
        # made read-only) it would leave /tmp read-only and every deeper bind and the work folder unreachable.
        out = {os.path.realpath(p) for p in paths if os.path.exists(p)}
        return sorted(p for p in out if p not in hidden and p not in scratch)

    for folder in writable:
        Path(folder).mkdir(parents=True, exist_ok=True)
    spec = {"hide_dirs": folders, "scratch_dirs": scratch, "hide_files": files,
            "read_only": kept([*needed_paths(), *read_only, *nvidia, *imports]),
            "writable": sorted({*kept(writable), os.path.realpath(workdir)}),
            "cwd": str(workdir), "cmd": cmd, "close_fds": list(close_fds or []), "loopback": loopback,
            "binds": [[os.path.realpath(a), os.path.realpath(b)] for a, b in binds or []]}
    spec_path = workdir / "sandbox.spec.json"
    if who.outer is not None:
        return _wrap_mapped(spec, spec_path, who.outer, read_only)
    spec_path.write_text(json.dumps(spec))
    unshare = _unshare()
    assert unshare is not None
    return [unshare, *UNSHARE_ARGS, "--", sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(spec_path)]


def _wrap_mapped(spec: dict[str, Any], spec_path: Path, outer: int, read_only: list[str]) -> list[str]:
    """The command line of a sandbox whose root is ``outer`` on the host: its writable folders handed over,
    the folders it cannot pass through hidden (see :func:`reachable`), and the spec written by root (the
    launcher reads only a spec of its own owner: not one the sandbox's user put there)."""
    for path in spec["writable"]:
        hand_over(path, outer)
    essential = {os.path.realpath(p) for p in read_only if os.path.isfile(p)}
    essential |= {os.path.dirname(os.path.realpath(sys.executable)), str(Path(__file__).resolve().parents[2])}
    spec["hide_dirs"] = sorted({*spec["hide_dirs"], *reachable(spec, outer, essential)})
    spec_path.unlink(missing_ok=True)
    fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(spec))
    return [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--map-to", str(outer), str(spec_path)]


@functools.lru_cache(maxsize=1)
def available() -> str:
    """Which isolation this machine offers (probed once per process by running the launcher; as root, also
    whether the sandbox's root can be the unprivileged uid: :func:`sandbox_identity`)."""
    global _fallback
    forced = os.environ.get(ENV_FORCE, "").strip().lower()
    if forced in ("process", PROCESS_ONLY, "none"):
        return PROCESS_ONLY
    problem, _fallback = _probe_full()
    if problem is None:
        return NAMESPACES
    if forced == NAMESPACES:
        raise RuntimeError(f"{ENV_FORCE}=namespaces, but the sandbox does not start here: {problem}")
    log.warning("%s; reason: %s", WARNING, problem)
    return PROCESS_ONLY


def _probe() -> str | None:
    """Why the sandbox does not start here (None when it does)."""
    return _probe_full()[0]


def _probe_full() -> tuple[str | None, str]:
    """``(why the sandbox does not start here or None, why its root is not the unprivileged uid or "")``.
    As root it first tries the unprivileged identity, the one workers get; where that fails, it says so (a
    warning, and :func:`sandbox_identity` gives the reason) and tries the root mapping of ``unshare
    --map-root-user`` instead."""
    if sys.platform != "linux":
        return "not Linux", ""
    fallback = ""
    outer = outer_id()
    if outer is not None:
        problem = _probe_as(Identity(UNPRIVILEGED, outer))
        if problem is None:
            return None, ""
        fallback = problem
        log.warning("sandbox: kernelskill runs as root, and the sandbox's root could not be mapped to the "
                    "unprivileged uid %d (%s); candidates run as root without capabilities instead, which can "
                    "read root-only files outside the hidden folders", outer, problem)
    if _unshare() is None:
        return "no unshare program (util-linux)", fallback
    return _probe_as(Identity(CALLER)), fallback


def _probe_as(identity: Identity) -> str | None:
    workdir = Path(tempfile.mkdtemp(prefix="ks-sandbox-probe-"))
    failed = "the sandbox failed" if identity.outer is not None else "unshare failed"
    try:
        # the probe checks the property, not only that unshare starts: / must be read-only inside
        check = ("import os, sys\ntry:\n    open('/ks-probe-write', 'w')\nexcept OSError:\n    pass\n"
                 "else:\n    os.unlink('/ks-probe-write')\n    sys.exit(7)\n"
                 "try:\n    open('/proc/thread-self/comm', 'w').write('ks-probe')\nexcept OSError:\n    sys.exit(8)")
        try:
            cmd = wrap([sys.executable, "-I", "-S", "-c", check], workdir=workdir, env={}, read_only=[],
                       writable=[], identity=identity)
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=workdir,
                                  env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        except (OSError, Unreachable, subprocess.TimeoutExpired) as exc:
            return f"{failed}: {exc}"
        if proc.returncode == 7:
            return "the sandbox could not make the file system read-only"
        if proc.returncode == 8:  # cuInit names its threads there: without it a worker has no GPU
            return PROC_READ_ONLY
        if proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
            return f"{failed}: {last[:200]}"
        return _cuda_problem(workdir, identity)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


#: the driver brought up through ctypes (no torch): prints cuInit's return code; exit 3 without a driver library
CUDA_CHECK = ("import ctypes, sys\ntry:\n    cuda = ctypes.CDLL('libcuda.so.1')\nexcept OSError:\n    sys.exit(3)\n"
              "rc = cuda.cuInit(0)\nprint(rc)\nsys.exit(0 if rc == 0 else 4)")
#: what the CUDA check passes on of this process's environment (where the driver and the devices are)
CUDA_ENV = ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")


def _cuda_problem(workdir: Path, identity: Identity) -> str | None:
    """On a machine with an NVIDIA driver: why CUDA starts outside the sandbox but not inside it (None when it
    starts in both, or in neither). A sandbox that takes the GPU away would make every GPU job a harness
    failure; the first wave-3 trip found exactly that (a read-only /proc), so it is checked, not assumed."""
    if not os.path.exists("/dev/nvidiactl"):
        return None
    env = {k: os.environ[k] for k in CUDA_ENV if k in os.environ}
    cmd = [sys.executable, "-I", "-S", "-c", CUDA_CHECK]
    try:
        outside = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
        if outside.returncode != 0:
            return None  # no CUDA here at all: the harness says so itself
        inside = subprocess.run(wrap(cmd, workdir=workdir, env=env, read_only=[], writable=[], identity=identity),
                                capture_output=True, text=True, timeout=60, cwd=workdir, env=env)
    except (OSError, Unreachable, subprocess.TimeoutExpired) as exc:
        return f"the sandbox's CUDA check did not finish: {exc}"
    if inside.returncode == 0:
        return None
    got = inside.stdout.strip() or (inside.stderr.strip().splitlines() or [f"exit {inside.returncode}"])[-1][:200]
    return f"CUDA does not start inside the sandbox although it does outside (cuInit inside: {got})"


def worker_returncode(returncode: int | None, mode: str) -> int | None:
    """The worker's own return code from the sandbox's exit status (negative: killed by that signal):
    the launcher exits 128+N when the worker died of signal N."""
    if mode == NAMESPACES and returncode is not None and 128 < returncode < 128 + 65:
        return -(returncode - 128)
    return returncode


# ----------------------------------------------------------------------------- seccomp (both modes)
_AUDIT_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # (AUDIT_ARCH_*, __NR_socket)
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
X32_SYSCALL_BIT = 0x40000000  # x86-64's x32 ABI: the same calls under other numbers (never used by torch or CUDA)


def deny_unix_sockets() -> str:
    """Install a seccomp filter on every thread of this process (and what it starts): ``socket(AF_UNIX,
    ...)`` fails with EPERM, so no path or abstract Unix socket of the host can be connected to;
    ``socketpair`` (pipes between a process's own threads and children) still works. A foreign
    architecture's system call is refused outright. Returns ``"on"`` or why it is not."""
    machine = platform.machine()
    if sys.platform != "linux" or machine not in _AUDIT_ARCH:
        return f"off (no filter for {sys.platform}/{machine})"
    arch, nr_socket = _AUDIT_ARCH[machine]
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06

    def insn(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)

    prog = b"".join([
        insn(ld_w_abs, 0, 0, 4),  # 0: seccomp_data.arch
        insn(jeq_k, 1, 0, arch),  # 1: this architecture -> 3
        insn(ret_k, 0, 0, SECCOMP_RET_KILL_PROCESS),  # 2
        insn(ld_w_abs, 0, 0, 0),  # 3: seccomp_data.nr
        insn(jge_k, 4, 0, X32_SYSCALL_BIT),  # 4: an x32-ABI call (socket by another number) -> 9, refused
        insn(jeq_k, 0, 2, nr_socket),  # 5: socket -> 6, anything else -> 8
        insn(ld_w_abs, 0, 0, 16),  # 6: args[0] (low 32 bits): the address family
        insn(jeq_k, 1, 0, socket.AF_UNIX),  # 7: AF_UNIX -> 9
        insn(ret_k, 0, 0, SECCOMP_RET_ALLOW),  # 8
        insn(ret_k, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM),  # 9
    ])
    filt = ctypes.create_string_buffer(prog, len(prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog) // 8, ctypes.cast(filt, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # required for an unprivileged filter (already set in the sandbox)
    rc = libc.syscall(_SYS_SECCOMP[machine], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                      ctypes.byref(fprog))
    if rc != 0:
        err = ctypes.get_errno()
        return f"off (seccomp: {os.strerror(err) if rc < 0 else f'thread {rc} could not be synchronised'})"
    return "on"


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
    gain one back: the candidate can neither undo a mount nor touch the network."""
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


def _locked_flags(path: str) -> int:
    """The per-mount flags the kernel will not let a user namespace clear (nosuid, nodev, noexec, atime)."""
    st = os.statvfs(path).f_flag
    flags = MS_NOSUID | (st & (MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME))
    if st & 4096:  # ST_RELATIME
        flags |= MS_RELATIME
    return flags


def _remount(libc: Any, path: str, *, read_only: bool) -> None:
    """Make one mount (a bind of ``path``) read-only or writable, keeping its locked flags."""
    _mount(libc, None, path, None, MS_BIND | MS_REMOUNT | (MS_RDONLY if read_only else 0) | _locked_flags(path))


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            raw = line.split()[4]
            points.append(raw.encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "replace"))
    return sorted(set(points), key=lambda p: p.count("/"))


def make_world_read_only(libc: Any) -> None:
    """Every mount of this mount namespace becomes read-only: ``mount_setattr(2)`` on ``/`` with
    AT_RECURSIVE; on a kernel without it (before 5.12), each mount point is remounted read-only."""

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    rc = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    if rc == 0:
        return
    first = ctypes.get_errno()
    failed = []
    for point in _mount_points():
        try:
            _remount(libc, point, read_only=True)
        except OSError as exc:
            failed.append(f"{point} ({exc.strerror})")
    if failed and any(p.startswith("/ (") for p in failed):
        raise OSError(first, "the file system could not be made read-only: " + ", ".join(failed[:5]))
    if failed:
        log.warning("sandbox: mounts left writable: %s", ", ".join(failed[:10]))


#: why the probe refuses a sandbox whose processes cannot write their own /proc entries
PROC_READ_ONLY = "the sandbox's /proc is read-only for its own processes (CUDA could not start there)"
#: the /proc entries that are a process's own besides the PID folders (links to the reader's folder): every
#: other entry is bound read-only over the writable /proc
PROC_OWN = ("self", "thread-self")


def open_own_proc(libc: Any) -> None:
    """The sandbox's /proc becomes writable for its own processes only: CUDA names its threads through
    ``/proc/<pid>/task/<tid>/comm`` while ``cuInit`` runs and fails with error 304 (an operating-system
    call failed) when /proc is read-only, so a read-only /proc is a sandbox without the GPU. Every entry
    of /proc that is not a process's folder (sysctls, ``sysrq-trigger``, the driver's files, irq and bus
    settings, ...) is bound read-only over it first. Fails closed: if one entry cannot be bound, /proc is
    made read-only again (and the worker then reports that it cannot reach CUDA)."""
    try:
        shared = [name for name in os.listdir("/proc") if not name.isdigit() and name not in PROC_OWN]
    except OSError as exc:
        log.warning("sandbox: /proc cannot be listed (%s); it stays read-only", exc.strerror)
        return
    try:
        for name in sorted(shared):
            path = f"/proc/{name}"
            if os.path.islink(path):  # mounts, net, ...: links into the reader's own process folder
                continue
            _mount(libc, path, path, None, MS_BIND | MS_REC)
            _remount(libc, path, read_only=True)
        _remount(libc, "/proc", read_only=False)
    except OSError as exc:
        log.warning("sandbox: /proc stays read-only (%s); CUDA cannot start in this worker", exc)
        try:
            _remount(libc, "/proc", read_only=True)
        except OSError:
            pass


def _loopback_up() -> None:
    """Bring up the sandbox's own loopback interface (the profiler and its target talk through it)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        req = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(sock.fileno(), siocgifflags, req))[1]
        fcntl.ioctl(sock.fileno(), siocsifflags, struct.pack("16sh14x", b"lo", flags | iff_up))


@dataclasses.dataclass
class Opened:
    """The kept paths (``O_PATH`` descriptors) to bind back, opened before anything is hidden."""

    fds: dict[str, int]
    binds: list[tuple[int, str]]

    def close(self) -> None:
        for fd in [*self.fds.values(), *(fd for fd, _dst in self.binds)]:
            try:
                os.close(fd)
            except OSError:
                pass


def open_kept(spec: dict[str, Any]) -> Opened:
    """Open what :func:`setup` binds back: the writable paths, the kept paths inside hidden or scratch
    folders, the sources of ``binds``."""
    hide_dirs = [*spec["hide_dirs"], *sorted(spec.get("scratch_dirs", []))]
    keeps = {p: True for p in spec["read_only"]} | {p: False for p in spec["writable"]}
    fds: dict[str, int] = {}
    for path, read_only in keeps.items():
        if not read_only or any(_under(path, d) for d in hide_dirs):
            try:
                fds[path] = os.open(path, os.O_PATH)
            except OSError as exc:  # gone since the spec was written (a test's temporary folder on sys.path)
                log.warning("sandbox: %s is not kept (%s)", path, exc.strerror)
    return Opened(fds, [(os.open(src, os.O_PATH), dst) for src, dst in spec.get("binds", [])])


def setup(spec: dict[str, Any], opened: Opened | None = None) -> None:
    """Make the world read-only, hide the secrets' folders and files, bring back what the worker needs.

    Kept paths are opened (``O_PATH``) before anything is hidden (``opened``: by the mapped launcher, while
    it was still the host's root) and bound back from ``/proc/self/fd`` afterwards. Hiding and bringing
    back run in order of path depth, so a hidden folder inside a kept one (a kernelskill home inside the
    repository) is hidden again, and a kept file inside that (the task of a run) comes back again. Writable
    paths are always bound (on a read-only world) and made writable.
    """
    libc = _libc()
    scratch = set(spec.get("scratch_dirs", []))
    hide_dirs = [*spec["hide_dirs"], *sorted(scratch)]
    keeps = {p: True for p in spec["read_only"]} | {p: False for p in spec["writable"]}
    opened = opened or open_kept(spec)
    fds, bind_fds = opened.fds, opened.binds
    if spec.get("loopback"):
        _loopback_up()
    make_world_read_only(libc)
    open_own_proc(libc)
    steps = [(d.count("/"), 0, d) for d in hide_dirs] + [(p.count("/"), 1, p) for p in fds]
    hidden_mounts = []
    for _depth, kind, path in sorted(steps):
        if kind == 0:
            inside_hidden = any(_under(path, d) and d != path for d in spec["hide_dirs"])
            if path not in scratch and not os.path.isdir(path) and not inside_hidden \
                    and any(_under(path, d) for d in scratch):
                try:  # a hidden folder inside a scratch one (a --home under /tmp): hidden all the same
                    os.makedirs(path)
                except OSError:
                    pass
            if os.path.isdir(path):
                options = "size=1g,mode=1777" if path in scratch else "size=4m,mode=0755"
                _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
                if path not in scratch:
                    hidden_mounts.append(path)
            continue
        source = f"/proc/self/fd/{fds[path]}"
        try:
            _make_point(path, source)
            _mount(libc, source, path, None, MS_BIND | MS_REC)
            _remount(libc, path, read_only=keeps[path])
        except OSError as exc:  # the worker fails later, naming what it could not reach, if it needed this
            if not keeps[path]:
                raise OSError(exc.errno, f"{path} cannot be made writable: {exc.strerror}") from exc
            log.warning("sandbox: %s could not be bound back (%s)", path, exc.strerror)
    for fd, dst in bind_fds:
        source = f"/proc/self/fd/{fd}"
        _make_point(dst, source)
        _mount(libc, source, dst, None, MS_BIND | MS_REC)
        _remount(libc, dst, read_only=False)
    for fd in [*fds.values(), *(fd for fd, _dst in bind_fds)]:
        os.close(fd)
    _hide_files(libc, spec["hide_files"], sorted(scratch), spec["hide_dirs"])
    for path in reversed(hidden_mounts):  # the mount points made for the kept paths are in place: read-only
        _remount(libc, path, read_only=True)
    _drop_privileges(libc)


def _hide_files(libc: Any, files: list[str], scratch: list[str], hidden_dirs: list[str]) -> None:
    """Each secret file reads as empty and cannot be written: an empty file (made in a scratch tmpfs, then
    unlinked there) is bound over it, read-only. One missing from this view (its folder is a scratch one)
    is made first, so the candidate cannot create it there either."""
    empty = None
    for folder in scratch:
        candidate = os.path.join(folder, f".ks-hidden-{os.getpid()}")
        try:
            with open(candidate, "w"):
                pass
            empty = candidate
            break
        except OSError:
            continue
    for f in files:
        try:
            if not os.path.exists(f):
                if any(_under(f, d) for d in hidden_dirs) or not any(_under(f, d) for d in scratch):
                    continue  # inside a hidden folder already (or nowhere to be made)
                _make_point(f, empty or "/dev/null")
            _mount(libc, empty or "/dev/null", f, None, MS_BIND)
            if empty:
                _remount(libc, f, read_only=True)
        except OSError as exc:
            log.warning("sandbox: %s could not be hidden (%s)", f, exc.strerror)
    if empty:
        os.unlink(empty)


def _setup_state(spec: dict[str, Any]) -> str:
    """What a failed setup had been asked to do and the mounts it left (paths only: the spec holds no secret)."""
    try:
        with open("/proc/self/mountinfo") as fh:
            mounts = [" ".join(line.split()[4:6]) for line in fh
                      if any(_under(line.split()[4], d) for d in spec.get("scratch_dirs", []))]
    except OSError as exc:
        mounts = [f"mountinfo unreadable ({exc.strerror})"]
    return (f"hidden folders: {spec.get('hide_dirs')}; scratch: {spec.get('scratch_dirs')}; "
            f"writable: {spec.get('writable')}; mounts under scratch: {mounts[-12:]}")


def launch(spec_path: str) -> int:
    """PID 1 of the sandbox (started by ``unshare``): set up, run the worker, record how it ended, exit.
    Nothing configures logging in this process: its warnings reach stderr (the worker's output, which the
    harness keeps) through logging's last-resort handler, message only."""
    return _pid1(json.loads(Path(spec_path).read_text()))


def _read_own_spec(spec_path: str) -> dict[str, Any]:
    """The spec, if it is a plain file of this process's own owner (root wrote it; the sandbox's user owns
    the folder around it, so a spec of any other owner is refused)."""
    fd = os.open(spec_path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise OSError(errno.EPERM, f"{spec_path} is not a spec of the launcher's own")
        return json.loads(fh.read())


def _unshare_ns(libc: Any, flags: int, what: str) -> None:
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"no new {what} namespace: {os.strerror(err)}")


def _map_user(libc: Any, outer: int) -> None:
    """Enter a new user namespace whose root is uid and gid ``outer`` on the host. Its maps are written as
    ``newuidmap`` would: by a helper still in the host's namespace, where it is root (CAP_SETUID and
    CAP_SETGID there allow any map); ``setgroups`` is denied (no one in the sandbox changes groups)."""
    me = os.getpid()
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    helper = os.fork()
    if helper == 0:  # pragma: no cover - the helper's own process
        answer = b"cancelled"
        try:
            os.close(go_w)
            os.close(done_r)
            if os.read(go_r, 1) == b"1":
                for name, text in (("setgroups", "deny"), ("uid_map", f"0 {outer} 1\n"), ("gid_map", f"0 {outer} 1\n")):
                    answer = f"/proc/{me}/{name}".encode()
                    fd = os.open(f"/proc/{me}/{name}", os.O_WRONLY)
                    try:
                        os.write(fd, text.encode())
                    finally:
                        os.close(fd)
                answer = b"ok"
        except OSError as exc:
            answer = answer + f": {exc.strerror}".encode()
        finally:
            try:
                os.write(done_w, answer)
            finally:
                os._exit(0)
    os.close(go_r)
    os.close(done_w)
    try:
        err = 0 if libc.unshare(CLONE_NEWUSER) == 0 else ctypes.get_errno()
        os.write(go_w, b"1" if err == 0 else b"0")
        answer = os.read(done_r, 1024)
    finally:
        os.close(go_w)
        os.close(done_r)
        os.waitpid(helper, 0)
    if err:
        raise OSError(err, f"no new user namespace: {os.strerror(err)}")
    if answer != b"ok":
        raise OSError(errno.EPERM, f"the user map 0 -> {outer} could not be written ({answer.decode(errors='replace')})")


def launch_mapped(outer: int, spec_path: str) -> int:
    """The sandbox when kernelskill runs as root (started as root in the host's namespaces): the sandbox's
    root becomes uid and gid ``outer`` on the host, which reads only what any user may read.

    Supplementary groups go first (root's would stay in force); then a user namespace with the map
    ``0 outer 1`` (:func:`_map_user`) and a private mount namespace. The kept paths are opened there while
    this process is still the host's root (its owner's rights reach into ``/root``: the interpreter of a
    virtual environment may live there); only then does it become the namespace's root (``outer`` on the
    host), and it makes the PID and network namespaces. Its child is the sandbox's PID 1 (a fresh
    ``/proc``, :func:`setup` with the opened paths, the worker); this process waits and exits as it did,
    as ``unshare --fork`` would."""
    libc = _libc()
    try:
        spec = _read_own_spec(spec_path)
        os.setgroups([])
        _map_user(libc, outer)
        _unshare_ns(libc, CLONE_NEWNS, "mount")
        _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
        opened = open_kept(spec)
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        _unshare_ns(libc, CLONE_NEWPID | CLONE_NEWNET, "PID and network")
    except (OSError, ValueError) as exc:
        log.error("sandbox setup failed: %s (set %s=process to run without the namespaces)", exc, ENV_FORCE)
        return 125
    pid = os.fork()
    if pid == 0:  # PID 1 of the new PID namespace
        code = 125
        try:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # no sandbox outlives its launcher
            try:
                _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            except OSError as exc:
                log.error("sandbox setup failed: %s (set %s=process to run without the namespaces)", exc,
                          ENV_FORCE)
            else:
                code = _pid1(spec, opened)
        except BaseException:  # noqa: BLE001 - whatever it is, this fork never returns into the caller
            traceback.print_exc()
        finally:
            os._exit(code)
    opened.close()
    for fd in spec.get("close_fds", []):  # only the worker holds the result channel
        try:
            os.close(int(fd))
        except OSError:
            pass
    while True:
        try:
            _done, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:  # pragma: no cover
            return 125
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status)


def _pid1(spec: dict[str, Any], opened: Opened | None = None) -> int:
    try:
        setup(spec, opened)
    except OSError as exc:
        log.error("sandbox setup failed: %s (set %s=process to run without the namespaces); %s", exc, ENV_FORCE,
                  _setup_state(spec))
        return 125
    os.chdir(spec["cwd"])
    pid = os.fork()
    if pid == 0:  # the worker (its environment is the launcher's: already scrubbed by the parent)
        try:
            os.execv(spec["cmd"][0], spec["cmd"])
        finally:
            os._exit(127)
    for fd in spec.get("close_fds", []):  # only the worker holds the result channel
        try:
            os.close(int(fd))
        except OSError:
            pass
    code = 0
    while True:  # as PID 1, reap every orphan until the worker itself ends
        try:
            done, status = os.wait()
        except ChildProcessError:
            break
        if done == pid:
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            break
    return 0 if code == 0 else (code if code > 0 else 128 - code)


def main(argv: list[str]) -> int:
    """``SPEC`` (inside ``unshare``) or ``--map-to OUTER SPEC`` (as root: :func:`launch_mapped`)."""
    if argv[:1] == ["--map-to"]:
        return launch_mapped(int(argv[1]), argv[2])
    return launch(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
