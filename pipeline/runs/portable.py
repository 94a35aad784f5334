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
from kernelskill.pipeline.runs.bounds import loads_json
from kernelskill.pipeline.runs.redact import current

log = logging.getLogger(__name__)

ARCHIVE_SUFFIX = ".kernelskill-run.tar.gz"
_TEXT_SUFFIXES = {".json", ".jsonl", ".md", ".py", ".txt", ".cu", ".cuh", ".log", ".toml", ".yaml", ".csv"}
_SECRET_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)\"?(api[_-]?key|authorization|bearer)\"?\s*[:=]\s*\"?(?!null|none|\"\")[A-Za-z0-9_\-\.]{12,}"),
]
_SKIP_DIRS = {"__pycache__", "build", ".cache"}
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
    try:
        task = json.loads(manifest.read_text(encoding="utf-8")).get("task") or "task.py"
    except json.JSONDecodeError as exc:
        return [Finding("run.json", exc.lineno, f"invalid JSON: {exc.msg}")]
    if not _inside(run_dir, str(task)):
        findings.append(Finding("run.json", 1, f"the task {task!r} is not a file inside the run folder"))
    events = run_dir / "events.jsonl"
    if events.is_file():
        for lineno, line in enumerate(events.read_text(encoding="utf-8").splitlines(), 1):
            try:
                data = json.loads(line).get("data") or {}
            except (json.JSONDecodeError, AttributeError):
                continue  # a torn last line is the run store's business
            for key in ("candidate", "csv"):
                rel = data.get(key)
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


#: caps on what an archive may unpack to (a run folder is a few MB; a gzip bomb is refused at its header)
MAX_MEMBERS = 20_000
MAX_MEMBER_BYTES = 512 * 2**20
MAX_TOTAL_BYTES = 2 * 2**30
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


def _copy_bounded(src, dest: Path, size: int, archive: Path, name: str) -> None:
    """Copy a member's data in chunks, never more than its header said (nor more than the cap)."""
    written = 0
    with src, open(dest, "wb") as out:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            written += len(chunk)
            if written > min(size, MAX_MEMBER_BYTES):
                raise PortabilityError(f"{archive}: member {display(name)} holds more than its header says")
            out.write(chunk)


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
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            if src is None:
                raise PortabilityError(f"{archive}: member {display(name)!r} has no data")
            _copy_bounded(src, target, m.size, archive, name)
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
        value, problem = loads_json(path.read_bytes().decode("utf-8", "replace"), max_chars=MAX_EVENT_LINE_CHARS)
        if problem:
            raise PortabilityError(f"{source}: {display(rel)}: {problem}")
        if path.name == "run.json" and not isinstance(value, dict):
            raise PortabilityError(f"{source}: {display(rel)}: not a JSON object")
    events = folder / "events.jsonl"
    if not events.is_file():
        return
    data = events.read_bytes()
    lines = data.split(b"\n")
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
    old_log, new_log = old / "events.jsonl", new / "events.jsonl"
    if not old_log.is_file():
        return True
    return new_log.is_file() and new_log.read_bytes().startswith(old_log.read_bytes())


def import_run(archive: Path, runs_dir: Path, *, replace: bool = False, require: tuple[str, ...] = ()) -> Path:
    """Unpack an exported run under ``runs_dir``; returns the run folder.

    All or nothing: the archive is unpacked into a temporary folder (within the member, count and size
    caps), checked (safe names, a run id, every JSON file and event line loads), and only then renamed
    into place; a refused archive leaves nothing behind (not even a runs folder it had to create).
    ``replace`` takes a run back that exists here already (carried to another machine and back): only
    when the archive's event log extends the local one, so no recorded step is ever lost. ``require``
    names files the run folder must hold (``run.json``); without them nothing is imported."""
    archive = Path(archive)
    if not archive.is_file():
        raise PortabilityError(f"{archive}: no such archive")
    runs_dir = Path(runs_dir)
    created = [p for p in [runs_dir, *runs_dir.parents] if not p.exists()]
    runs_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=runs_dir))
    done = False
    try:
        top = _extract(archive, staging)
        dest = runs_dir / top
        if dest.exists() and not replace:
            raise PortabilityError(f"{dest}: a run with this id exists already (--replace takes it back "
                                   "when the archive extends it)")
        missing = [name for name in require if not (staging / top / name).is_file()]
        if missing:
            raise PortabilityError(f"{archive}: {top} is not a run folder (no {', '.join(missing)})")
        validate_run_folder(staging / top, str(archive))
        if dest.exists():
            if not _log_extends(dest, staging / top):
                raise PortabilityError(f"{archive}: its event log does not extend the local run {top} "
                                       "(the local run has steps the archive lacks); nothing replaced")
            old = staging / ".replaced"
            os.replace(dest, old)
            os.replace(staging / top, dest)
        else:
            os.replace(staging / top, dest)
        done = True
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise PortabilityError(f"{archive}: unreadable archive: {display(str(exc))}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not done:
            for path in created:  # innermost first: only folders this import made, and only if empty
                with contextlib.suppress(OSError):
                    path.rmdir()
    log.info("imported %s into %s", top, runs_dir)
    return dest


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
    """Whether ``path`` is a bundle of run archives (:func:`export_runs`) rather than one run's archive."""
    try:
        # written uncompressed (its members are gzip already) but read compressed too (a bundle kept as
        # .tar.gz, as the published results are); a run archive's members are the run's files, not archives
        with tarfile.open(path, "r:*") as tar:
            return all(m.name.endswith(ARCHIVE_SUFFIX) and m.isfile() for m in tar.getmembers())
    except (tarfile.TarError, OSError):
        return False


def import_runs(bundle: Path, runs_dir: Path, *, replace: bool = False, require: tuple[str, ...] = ()
                ) -> list[Path]:
    """Unpack every run archive of a bundle with :func:`import_run` (its checks, one run at a time)."""
    bundle = Path(bundle)
    if not bundle.is_file():
        raise PortabilityError(f"{bundle}: no such bundle")
    out: list[Path] = []
    staging = Path(runs_dir) / f".bundle-{bundle.name}"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with tarfile.open(bundle, "r:*") as tar:  # plain, or compressed as a whole (.tar.gz)
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise PortabilityError(f"{bundle}: more than {MAX_MEMBERS:,} members")
                name = PurePosixPath(member.name)
                if (not member.isfile() or name.is_absolute() or len(name.parts) != 1
                        or not member.name.endswith(ARCHIVE_SUFFIX) or not is_run_id(member.name)):
                    raise PortabilityError(f"{bundle}: member {display(member.name)!r} is not a run archive")
                src = tar.extractfile(member)
                assert src is not None
                target = staging / name.name
                _copy_bounded(src, target, member.size, bundle, member.name)  # within the caps of one archive
                out.append(import_run(target, runs_dir, replace=replace, require=require))
                target.unlink()
    except (tarfile.TarError, EOFError) as exc:
        raise PortabilityError(f"{bundle}: unreadable bundle: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out
