"""Carry run folders between machines: a portability check, and export/import as one archive.

A run folder is portable when every path in it is relative, nothing in it names this machine, and no
credential is stored in it. ``export_run`` refuses a folder that fails the check; ``import_run``
extracts safely (no absolute names, no ``..``, no links) and refuses to overwrite an existing run.
Standard library only.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tarfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ARCHIVE_SUFFIX = ".kernelskill-run.tar.gz"
_TEXT_SUFFIXES = {".json", ".jsonl", ".md", ".py", ".txt", ".cu", ".cuh", ".log", ".toml", ".yaml", ".csv"}
_SECRET_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)\"?(api[_-]?key|authorization|bearer)\"?\s*[:=]\s*\"?(?!null|none|\"\")[A-Za-z0-9_\-\.]{12,}"),
]
_SKIP_DIRS = {"__pycache__", "build", ".cache"}


class PortabilityError(Exception):
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
            yield Path(root) / name


def check_portable(run_dir: Path) -> list[Finding]:
    """Absolute paths of this machine, host names and credentials found in the run's text files."""
    run_dir = Path(run_dir)
    markers = _machine_markers(run_dir)
    findings: list[Finding] = []
    for path in _files(run_dir):
        rel = path.relative_to(run_dir).as_posix()
        if path.is_symlink():
            findings.append(Finding(rel, 0, "symbolic link"))
            continue
        if path.suffix not in _TEXT_SUFFIXES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for marker in markers:
                if marker in line:
                    findings.append(Finding(rel, lineno, f"names this machine ({marker!r})"))
            for pattern in _SECRET_PATTERNS:
                if pattern.search(line):
                    findings.append(Finding(rel, lineno, "looks like a credential"))
    return findings


def export_run(run_dir: Path, archive: Path | None = None) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise PortabilityError(f"{run_dir}: no such run folder")
    findings = check_portable(run_dir)
    if findings:
        raise PortabilityError(f"{run_dir.name}: not portable: {findings[0]}"
                               + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""))
    archive = Path(archive) if archive else Path.cwd() / f"{run_dir.name}{ARCHIVE_SUFFIX}"
    tmp = archive.with_name(archive.name + ".part")
    with tarfile.open(tmp, "w:gz") as tar:
        for path in _files(run_dir):
            arcname = f"{run_dir.name}/{path.relative_to(run_dir).as_posix()}"
            tar.add(path, arcname=arcname, recursive=False)
    os.replace(tmp, archive)
    log.info("exported %s to %s", run_dir.name, archive)
    return archive


def _safe_members(tar: tarfile.TarFile, archive: Path) -> tuple[str, list[tarfile.TarInfo]]:
    members = tar.getmembers()
    if not members:
        raise PortabilityError(f"{archive}: empty archive")
    tops: set[str] = set()
    for m in members:
        name = m.name
        parts = Path(name).parts
        if name.startswith("/") or ".." in parts or not parts:
            raise PortabilityError(f"{archive}: unsafe member name {name!r}")
        if not (m.isfile() or m.isdir()):
            raise PortabilityError(f"{archive}: member {name!r} is not a plain file or folder")
        tops.add(parts[0])
    if len(tops) != 1:
        raise PortabilityError(f"{archive}: expected one run folder, found {sorted(tops)}")
    return tops.pop(), members


def import_run(archive: Path, runs_dir: Path) -> Path:
    """Unpack an exported run under ``runs_dir``; returns the run folder."""
    archive = Path(archive)
    if not archive.is_file():
        raise PortabilityError(f"{archive}: no such archive")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            top, members = _safe_members(tar, archive)
            dest = Path(runs_dir) / top
            if dest.exists():
                raise PortabilityError(f"{dest}: a run with this id exists already")
            staging = Path(runs_dir) / f".import-{top}"
            staging.mkdir(parents=True, exist_ok=False)
            for m in members:
                target = staging / m.name
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                assert src is not None
                with src, open(target, "wb") as out:
                    out.write(src.read())
            os.replace(staging / top, dest)
            staging.rmdir()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise PortabilityError(f"{archive}: unreadable archive: {exc}") from exc
    log.info("imported %s into %s", top, runs_dir)
    return dest

