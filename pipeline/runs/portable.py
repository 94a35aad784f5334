"""Carry run folders between machines: a portability check, and export/import as one archive.

A run folder is portable when every path in it is relative, nothing in it names this machine, and no
credential is stored in it. ``export_run`` refuses a folder that fails the check; ``import_run``
extracts safely (no absolute names, no ``..``, no links, caps on member count and sizes), checks that
the run loads, and only then renames it into place; it never overwrites an existing run.
Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import socket
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.bounds import (
    MAX_EVENT_LOG_BYTES,
    MAX_EVENT_LOG_LINES,
    loads_json,
    read_bounded,
)
from kernelskill.pipeline.runs.redact import current

log = logging.getLogger(__name__)

ARCHIVE_SUFFIX = ".kernelskill-run.tar.gz"
_TEXT_SUFFIXES = {".json", ".jsonl", ".md", ".py", ".txt", ".cu", ".cuh", ".log", ".toml", ".yaml", ".csv"}
_SECRET_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)\"?(api[_-]?key|authorization|bearer)\"?\s*[:=]\s*\"?(?!null|none|\"\")[A-Za-z0-9_\-\.]{12,}"),
]
_SKIP_DIRS = {"__pycache__", "build", ".cache"}
EVENTS_FILE = "events.jsonl"
_SKIP_FILES = {".lock"}  # the run's process lock: per machine, never carried


class PortabilityError(KernelskillError):
    """The run folder or archive cannot be carried; the message names the file."""


@dataclass
class Finding:
    path: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}"


def _machine_markers(run_dir: Path) -> list[str]:
    markers = {str(run_dir.resolve()), str(Path.home())}
    host = socket.gethostname()
    if len(host) >= 6:
        markers.add(host)
    return sorted(m for m in markers if len(m) > 1 and m != "/")


def _files(run_dir: Path):
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if name in _SKIP_FILES or name.endswith((".tmp", ".part")) or name.startswith(".import-"):
                continue
            yield Path(root) / name


def check_portable(run_dir: Path) -> list[Finding]:
    """Absolute paths of this machine, host names and credentials found in the run's files: every file is
    searched for the configured secrets (:func:`~kernelskill.pipeline.runs.redact.current`: keys, secret-file
    values and their encoded forms, whatever their shape); text files also for machine names and
    credential shapes."""
    run_dir = Path(run_dir)
    markers = _machine_markers(run_dir)
    redactor = current()
    findings: list[Finding] = []
    for path in _files(run_dir):
        rel = path.relative_to(run_dir).as_posix()
        if path.is_symlink():
            findings.append(Finding(rel, 0, "symbolic link"))
            continue
        try:
            with path.open("rb") as fh:
                data = fh.read(MAX_MEMBER_BYTES + 1)
        except OSError as exc:
            findings.append(Finding(rel, 0, f"unreadable ({exc.strerror or exc})"))
            continue
        text = data.decode("utf-8", "replace")
        if redactor.holds_known(text):
            line = next((n for n, ln in enumerate(text.splitlines(), 1) if redactor.holds_known(ln)), 0)
            findings.append(Finding(rel, line, "holds a configured secret (a key or a secret-file value)"))
        if path.suffix not in _TEXT_SUFFIXES:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for marker in markers:
                if marker in line:
                    findings.append(Finding(rel, lineno, f"names this machine ({marker!r})"))
            for pattern in _SECRET_PATTERNS:
                if pattern.search(line):
                    findings.append(Finding(rel, lineno, "looks like a credential"))
    return findings


def _inside(run_dir: Path, rel: str) -> bool:
    if not rel or Path(rel).is_absolute() or ".." in Path(rel).parts:
        return False
    return (run_dir / rel).is_file()


def check_self_contained(run_dir: Path) -> list[Finding]:
    """A run folder (one with ``run.json``) holds its task and every candidate its log names, by
    relative path. Folders without a manifest are not checked here."""
    run_dir = Path(run_dir)
    manifest = run_dir / "run.json"
    if not manifest.is_file():
        return []
    findings: list[Finding] = []
    raw, problem = read_bounded(manifest, MAX_EVENT_LINE_CHARS)
    if raw is None:
        return [Finding("run.json", 0, problem)]
    try:
        task = json.loads(raw).get("task") or "task.py"
    except json.JSONDecodeError as exc:
        return [Finding("run.json", exc.lineno, f"invalid JSON: {exc.msg}")]
    except (AttributeError, ValueError, RecursionError):
        return [Finding("run.json", 1, "not a JSON object")]
    if not _inside(run_dir, str(task)):
        findings.append(Finding("run.json", 1, f"the task {task!r} is not a file inside the run folder"))
    data, problem = read_bounded(run_dir / EVENTS_FILE, MAX_EVENT_LOG_BYTES)
    if problem:
        findings.append(Finding(EVENTS_FILE, 0, problem))
    if data is not None:
        for lineno, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            try:
                event_data = json.loads(line).get("data") or {}
            except (json.JSONDecodeError, AttributeError, RecursionError):
                continue  # a torn last line is the run store's business
            for key in ("candidate", "csv"):
                rel = event_data.get(key) if isinstance(event_data, dict) else None
                if isinstance(rel, str) and rel and not _inside(run_dir, rel):
                    findings.append(Finding("events.jsonl", lineno, f"{key} {rel!r} is not a file inside the run"))
    return findings


def export_run(run_dir: Path, archive: Path | None = None) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise PortabilityError(f"{run_dir}: no such run folder")
    findings = check_portable(run_dir) + check_self_contained(run_dir)
    if findings:
        raise PortabilityError(f"{run_dir.name}: not portable: {findings[0]}"
                               + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""))
    archive = Path(archive) if archive else Path.cwd() / f"{run_dir.name}{ARCHIVE_SUFFIX}"
    tmp = archive.with_name(archive.name + ".part")
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tmp, "w:gz") as tar:
            for path in _files(run_dir):
                arcname = f"{run_dir.name}/{path.relative_to(run_dir).as_posix()}"
                tar.add(path, arcname=arcname, recursive=False)
        os.replace(tmp, archive)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise PortabilityError(f"{archive}: cannot write the archive: {exc.strerror or exc}") from exc
    log.info("exported %s to %s", run_dir.name, archive)
    return archive


#: caps on what an archive may unpack to (a run folder is a few MB; a gzip bomb is refused at its header,
#: and a member whose data runs past its header is cut off at the header's size)
MAX_MEMBERS = 20_000
MAX_MEMBER_BYTES = 128 * 2**20
MAX_TOTAL_BYTES = 512 * 2**20
#: what a whole bundle may unpack to (every run of it is staged before any is placed)
MAX_BUNDLE_BYTES = 4 * MAX_TOTAL_BYTES
#: bytes after a tar's end-of-archive blocks (a tar's own padding is under 10 KiB)
MAX_TRAILING_BYTES = 2**20
MAX_EVENT_LINE_CHARS = 32 * 2**20
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_CHUNK = 2**20


def display(name: str, limit: int = 120) -> str:
    """``name`` safe to print: control characters (ANSI escapes, newlines) shown as escapes, cut to
    ``limit`` characters."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(name))
    return out if len(out) <= limit else out[:limit] + "..."


def is_run_id(name: str) -> bool:
    return bool(_RUN_ID_RE.match(name))


def _copy_bounded(src, dest: Path, size: int, archive: Path, name: str, *, max_lines: int | None = None) -> None:
    """Copy a member's data in chunks, never more than its header said (nor more than the cap); with
    ``max_lines``, refuse it as soon as it holds more lines than that."""
    written = lines = 0
    with src, open(dest, "wb") as out:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            written += len(chunk)
            if written > min(size, MAX_MEMBER_BYTES):
                raise PortabilityError(f"{archive}: member {display(name)} holds more than its header says")
            if max_lines is not None:
                lines += chunk.count(b"\n")
                if lines > max_lines:
                    raise PortabilityError(f"{archive}: {display(name)} holds more than {max_lines:,} lines "
                                           f"(at most {max_lines:,} events in a run's log)")
            out.write(chunk)


def _read_to_end(tar: tarfile.TarFile, archive: Path) -> None:
    """Read what follows the last member, so a compressed stream is checked to its end (gzip's CRC and
    length trailer; a zeroed CRC is refused) and trailing data stays within :data:`MAX_TRAILING_BYTES`."""
    stream = tar.fileobj
    if stream is None:  # pragma: no cover - tarfile always has one when reading
        return
    trailing = 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return
        trailing += len(chunk)
        if trailing > MAX_TRAILING_BYTES:
            raise PortabilityError(f"{archive}: more than {MAX_TRAILING_BYTES:,} bytes after the last member")


def _extract(archive: Path, staging: Path) -> str:
    """Unpack ``archive`` into ``staging`` member by member, within the caps; returns the run folder's name.
    Every member must be a plain file or folder with a safe relative name inside one run folder whose name
    is a run id."""
    top: str | None = None
    count = total = 0
    with tarfile.open(archive, "r:gz") as tar:
        for m in tar:
            count += 1
            if count > MAX_MEMBERS:
                raise PortabilityError(f"{archive}: more than {MAX_MEMBERS:,} members")
            name = m.name
            parts = PurePosixPath(name).parts
            if (not parts or name.startswith("/") or ".." in parts or "\\" in name
                    or not all(ch.isprintable() for ch in name)):
                raise PortabilityError(f"{archive}: unsafe member name {display(name)!r}")
            if not (m.isfile() or m.isdir()):
                raise PortabilityError(f"{archive}: member {display(name)!r} is not a plain file or folder")
            if top is None:
                top = parts[0]
                if not is_run_id(top):
                    raise PortabilityError(f"{archive}: {display(top)!r} is not a run id (letters, digits, "
                                           "'_', '.', '-')")
            elif parts[0] != top:
                raise PortabilityError(f"{archive}: expected one run folder, found {display(top)!r} and "
                                       f"{display(parts[0])!r}")
            target = staging.joinpath(*parts)
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if m.size > MAX_MEMBER_BYTES:
                raise PortabilityError(f"{archive}: member {display(name)!r} is {m.size:,} bytes "
                                       f"(at most {MAX_MEMBER_BYTES:,})")
            total += m.size
            if total > MAX_TOTAL_BYTES:
                raise PortabilityError(f"{archive}: unpacks to more than {MAX_TOTAL_BYTES:,} bytes")
            events = len(parts) == 2 and parts[1] == EVENTS_FILE
            if events and m.size > MAX_EVENT_LOG_BYTES:
                raise PortabilityError(f"{archive}: {display(name)} unpacks to {m.size:,} bytes (at most "
                                       f"{MAX_EVENT_LOG_BYTES:,} for a run's event log)")
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            if src is None:
                raise PortabilityError(f"{archive}: member {display(name)!r} has no data")
            _copy_bounded(src, target, m.size, archive, name, max_lines=MAX_EVENT_LOG_LINES if events else None)
        _read_to_end(tar, archive)
    if top is None:
        raise PortabilityError(f"{archive}: empty archive")
    return top


def validate_run_folder(folder: Path, source: str) -> None:
    """The files a run is read from must load: ``run.json`` and every other JSON file is bounded JSON,
    every line of ``events.jsonl`` (but a torn last one) is a bounded JSON event. Raises on the first
    problem, naming the file and line."""
    for path in sorted(folder.rglob("*.json")):
        rel = path.relative_to(folder).as_posix()
        if path.parent.name == "exchange" and path.name.endswith(".answer.json"):
            continue  # an unusable answer file is set aside when the run reads it
        raw, problem = read_bounded(path, MAX_EVENT_LINE_CHARS)
        if raw is None:
            raise PortabilityError(f"{source}: {display(rel)}: {problem}")
        value, problem = loads_json(raw.decode("utf-8", "replace"), max_chars=MAX_EVENT_LINE_CHARS)
        if problem:
            raise PortabilityError(f"{source}: {display(rel)}: {problem}")
        if path.name == "run.json" and not isinstance(value, dict):
            raise PortabilityError(f"{source}: {display(rel)}: not a JSON object")
    events = folder / EVENTS_FILE
    if not events.is_file():
        return
    data, problem = read_bounded(events, MAX_EVENT_LOG_BYTES)
    if data is None:
        raise PortabilityError(f"{source}: {display(folder.name)}/{EVENTS_FILE}: {problem}")
    lines = data.split(b"\n")
    if len(lines) > MAX_EVENT_LOG_LINES + 1:
        raise PortabilityError(f"{source}: {display(folder.name)}/{EVENTS_FILE}: more than "
                               f"{MAX_EVENT_LOG_LINES:,} lines")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            value, problem = None, "not UTF-8"
        else:
            value, problem = loads_json(text, max_chars=MAX_EVENT_LINE_CHARS)
        if problem and number == len(lines):
            continue  # a torn last line (no newline after it): the run store skips it
        if not problem and not (isinstance(value, dict) and isinstance(value.get("type"), str)
                                and isinstance(value.get("data", {}), dict)
                                and (value.get("step") is None or isinstance(value.get("step"), str))):
            problem = "not an event (an object with a type and a data object)"
        if problem:
            raise PortabilityError(f"{source}: {display(folder.name)}/events.jsonl:{number}: {problem}")


def _log_extends(old: Path, new: Path) -> bool:
    """Whether the event log in ``new`` holds every event of ``old`` (it is ``old`` plus more lines)."""
    old_log, new_log = old / EVENTS_FILE, new / EVENTS_FILE
    if not old_log.is_file():
        return True
    if not new_log.is_file() or new_log.stat().st_size < old_log.stat().st_size:
        return False
    with old_log.open("rb") as a, new_log.open("rb") as b:  # chunk by chunk: neither is held whole
        while chunk := a.read(_CHUNK):
            if b.read(len(chunk)) != chunk:
                return False
    return True


class _Staged:
    """One run unpacked and checked in a staging folder, waiting to be placed."""

    def __init__(self, archive: Path, top: str, folder: Path) -> None:
        self.archive, self.top, self.folder = archive, top, folder


def _stage(archive: Path, staging: Path, require: tuple[str, ...]) -> _Staged:
    """Unpack ``archive`` into its own folder under ``staging`` and check it (names, caps, JSON, events)."""
    into = Path(tempfile.mkdtemp(prefix="run-", dir=staging))
    try:
        top = _extract(archive, into)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise PortabilityError(f"{archive}: unreadable archive: {display(str(exc))}") from exc
    missing = [name for name in require if not (into / top / name).is_file()]
    if missing:
        raise PortabilityError(f"{archive}: {top} is not a run folder (no {', '.join(missing)})")
    validate_run_folder(into / top, str(archive))
    return _Staged(archive, top, into / top)


def _check_places(staged: list[_Staged], runs_dir: Path, replace: bool) -> None:
    """Refuse before anything is placed: one id twice, a run that exists (without ``replace``), or a local
    run whose log the archive does not extend."""
    seen: dict[str, Path] = {}
    for item in staged:
        if item.top in seen:
            raise PortabilityError(f"{item.archive}: run {item.top} comes twice (also in {seen[item.top]})")
        seen[item.top] = item.archive
        dest = runs_dir / item.top
        if dest.exists() and not replace:
            raise PortabilityError(f"{dest}: a run with this id exists already (--replace takes it back "
                                   "when the archive extends it)")
        if dest.exists() and not _log_extends(dest, item.folder):
            raise PortabilityError(f"{item.archive}: its event log does not extend the local run {item.top} "
                                   "(the local run has steps the archive lacks); nothing replaced")


def _place_all(staged: list[_Staged], runs_dir: Path, staging: Path) -> list[Path]:
    """Rename every staged run into place; if one rename fails, the ones placed are taken back (and the
    runs they replaced restored), so the runs folder is as it was."""
    placed: list[tuple[Path, Path | None]] = []
    try:
        for n, item in enumerate(staged):
            dest = runs_dir / item.top
            old: Path | None = None
            if dest.exists():
                old = staging / f".replaced-{n}"
                os.replace(dest, old)
            try:
                os.replace(item.folder, dest)
            except OSError:
                if old is not None:
                    os.replace(old, dest)
                raise
            placed.append((dest, old))
    except OSError as exc:
        for dest, old in reversed(placed):
            with contextlib.suppress(OSError):
                shutil.rmtree(dest)
                if old is not None:
                    os.replace(old, dest)
        raise PortabilityError(f"{runs_dir}: cannot place the imported runs: {exc.strerror or exc}; "
                               "nothing imported") from exc
    return [dest for dest, _ in placed]


def import_archives(archives: list[Path], runs_dir: Path, *, replace: bool = False,
                    require: tuple[str, ...] = ()) -> list[Path]:
    """Unpack exported runs under ``runs_dir``; returns their folders, in the order given.

    All or nothing: every archive is unpacked into a temporary folder (within the member, count, size and
    event-log caps, its compressed stream read and checked to the end), checked (safe names, a run id,
    every JSON file and event line loads), and only when all of them pass are they renamed into place; one
    refused archive leaves nothing behind (not even a runs folder the import had to create). ``replace``
    takes a run back that exists here already (carried to another machine and back): only when the
    archive's event log extends the local one, so no recorded step is ever lost. ``require`` names files
    every run folder must hold (``run.json``)."""
    archives = [Path(a) for a in archives]
    for archive in archives:
        if not archive.is_file():
            raise PortabilityError(f"{archive}: no such archive")
    runs_dir = Path(runs_dir)
    with _staging(runs_dir) as staging:
        staged = [_stage(archive, staging, require) for archive in archives]
        _check_places(staged, runs_dir, replace)
        out = _place_all(staged, runs_dir, staging)
    for dest in out:
        log.info("imported %s into %s", dest.name, runs_dir)
    return out


@contextlib.contextmanager
def _staging(runs_dir: Path):
    """A temporary folder inside ``runs_dir`` (same filesystem: placing is a rename), removed afterwards;
    on failure the folders made to hold ``runs_dir`` are removed too (only if empty)."""
    created = [p for p in [runs_dir, *runs_dir.parents] if not p.exists()]
    done = False
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".import-", dir=runs_dir))
    except OSError as exc:
        raise PortabilityError(f"{runs_dir}: cannot import into it: {exc.strerror or exc}") from exc
    try:
        yield staging
        done = True
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not done:
            for path in created:  # innermost first: only folders this import made, and only if empty
                with contextlib.suppress(OSError):
                    path.rmdir()


def import_run(archive: Path, runs_dir: Path, *, replace: bool = False, require: tuple[str, ...] = ()) -> Path:
    """Unpack one exported run under ``runs_dir`` (:func:`import_archives`); returns the run folder."""
    return import_archives([archive], runs_dir, replace=replace, require=require)[0]


# Several runs in ONE file -------------------------------------------------------------------------------
BUNDLE_SUFFIX = ".tar"


def export_runs(run_dirs: list[Path], bundle: Path) -> tuple[Path, list[str]]:
    """Every run of ``run_dirs`` as one uncompressed tar of per-run archives (each made and checked by
    :func:`export_run`), so one file carries a whole suite. A run that is not portable is left out and
    named in the returned list of problems; the others still travel."""
    bundle = Path(bundle)
    problems: list[str] = []
    tmp = bundle.with_name(bundle.name + ".part")
    staging = bundle.with_name(f".{bundle.name}.runs")
    try:
        bundle.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        with tarfile.open(tmp, "w") as tar:
            for run_dir in run_dirs:
                try:
                    archive = export_run(Path(run_dir), staging / f"{Path(run_dir).name}{ARCHIVE_SUFFIX}")
                except PortabilityError as exc:
                    problems.append(str(exc))
                    continue
                tar.add(archive, arcname=archive.name, recursive=False)
        os.replace(tmp, bundle)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise PortabilityError(f"{bundle}: cannot write the bundle: {exc.strerror or exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("exported %d runs to %s", len(run_dirs) - len(problems), bundle)
    return bundle, problems


def is_bundle(path: Path) -> bool:
    """Whether ``path`` is a bundle of run archives (:func:`export_runs`) rather than one run's archive:
    its first member is a run archive (a run archive's members are the run's files, not archives)."""
    try:
        # written uncompressed (its members are gzip already) but read compressed too (a bundle kept as
        # .tar.gz, as the published results are)
        with tarfile.open(path, "r:*") as tar:
            first = tar.next()
            return first is not None and first.isfile() and first.name.endswith(ARCHIVE_SUFFIX)
    except (tarfile.TarError, OSError, EOFError, zlib.error):
        return False


def import_runs(bundle: Path, runs_dir: Path, *, replace: bool = False, require: tuple[str, ...] = ()
                ) -> list[Path]:
    """Unpack every run archive of a bundle, all or nothing: every archive is taken out and checked like
    :func:`import_archives` checks one, and only when all pass are the runs placed; a bad one (the third,
    say) imports none of them."""
    bundle = Path(bundle)
    if not bundle.is_file():
        raise PortabilityError(f"{bundle}: no such bundle")
    runs_dir = Path(runs_dir)
    with _staging(runs_dir) as staging:
        staged: list[_Staged] = []
        total = 0
        try:
            with tarfile.open(bundle, "r:*") as tar:  # plain, or compressed as a whole (.tar.gz)
                for count, member in enumerate(tar, start=1):
                    if count > MAX_MEMBERS:
                        raise PortabilityError(f"{bundle}: more than {MAX_MEMBERS:,} members")
                    name = PurePosixPath(member.name)
                    if (not member.isfile() or name.is_absolute() or len(name.parts) != 1
                            or not member.name.endswith(ARCHIVE_SUFFIX) or not is_run_id(member.name)):
                        raise PortabilityError(f"{bundle}: member {display(member.name)!r} is not a run archive")
                    if member.size > MAX_MEMBER_BYTES:
                        raise PortabilityError(f"{bundle}: member {display(member.name)!r} is "
                                               f"{member.size:,} bytes (at most {MAX_MEMBER_BYTES:,})")
                    total += member.size
                    if total > MAX_BUNDLE_BYTES:
                        raise PortabilityError(f"{bundle}: holds more than {MAX_BUNDLE_BYTES:,} bytes of archives")
                    src = tar.extractfile(member)
                    if src is None:
                        raise PortabilityError(f"{bundle}: member {display(member.name)!r} has no data")
                    target = staging / name.name
                    _copy_bounded(src, target, member.size, bundle, member.name)  # within the caps of one archive
                    try:
                        staged.append(_stage(target, staging, require))
                    except PortabilityError as exc:  # named as the bundle's member, not the staged copy
                        raise PortabilityError(str(exc).replace(str(target), f"{bundle}:{name.name}")) from exc
                    target.unlink()
                _read_to_end(tar, bundle)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise PortabilityError(f"{bundle}: unreadable bundle: {display(str(exc))}") from exc
        _check_places(staged, runs_dir, replace)
        out = _place_all(staged, runs_dir, staging)
    log.info("imported %d runs from %s into %s", len(out), bundle, runs_dir)
    return out
