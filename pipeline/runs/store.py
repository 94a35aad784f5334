"""A run folder (:class:`Run`) and the folder of all runs (:class:`RunStore`)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelskill.atomic_file import write_text_atomic
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.bounds import read_bounded
from kernelskill.pipeline.runs.events import (
    CANDIDATES,
    EVENTS,
    LOCK,
    MANIFEST,
    TASK,
    EventLog,
    new_run_id,
    step_filename,
    utcnow,
)
from kernelskill.pipeline.runs.portable import display, is_run_id
from kernelskill.pipeline.runs.redact import current

log = logging.getLogger(__name__)

#: a manifest is a few hundred bytes; a candidate is bounded by the answer bounds (256 K characters)
MAX_MANIFEST_BYTES = 1 << 20
MAX_RUN_FILE_BYTES = 4 << 20
#: the mode of the files an evaluation's worker reads (the task copy, the candidates), whatever the umask
SANDBOX_READABLE = 0o644



class Run:
    """One run folder: manifest, task copy, candidates and the event log."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.id = path.name
        scrub = {str(path.resolve()): ".", str(path.absolute()): "."}
        try:
            scrub[str(Path.home())] = "~"
        except RuntimeError:  # pragma: no cover - no home directory
            pass
        scrub[str(Path(__file__).resolve().parents[2])] = "<kernelskill>"  # where the package is installed
        host = socket.gethostname()
        if len(host) >= 6:
            scrub[host] = "<host>"
        self.log = EventLog(path / EVENTS, scrub=scrub)

    @property
    def task_path(self) -> Path:
        return self.path / TASK

    @property
    def manifest(self) -> dict[str, Any]:
        file = self.path / MANIFEST
        data, problem = read_bounded(file, MAX_MANIFEST_BYTES)
        if data is None:
            raise KernelskillError(f"{file}: {problem}" if problem else f"{file}: not a run folder (no {MANIFEST})")
        try:
            value = json.loads(data)
        except json.JSONDecodeError as exc:
            raise KernelskillError(f"{file}:{exc.lineno}: invalid JSON: {exc.msg}") from exc
        except (ValueError, RecursionError) as exc:
            raise KernelskillError(f"{file}: invalid JSON: {' '.join(str(exc).split())[:120]}") from exc
        if not isinstance(value, dict):
            raise KernelskillError(f"{file}: not a JSON object")
        return value

    @property
    def protocol(self) -> str | None:
        """The protocol the run's candidates are judged by, as ``load_protocol`` takes it (a preset name or
        a file): its manifest's harness settings, else the manifest's protocol field; None for neither."""
        manifest = self.manifest
        return (manifest.get("harness") or {}).get("protocol") or manifest.get("protocol")

    @property
    def precision(self) -> str:
        """The dtype the run's task is evaluated in (fp32 | bf16 | fp16): its manifest's harness settings; fp32
        for a run started before the setting existed."""
        return str((self.manifest.get("harness") or {}).get("precision") or "fp32")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive use of the run by one process (released by the OS even on kill -9)."""
        import fcntl

        with (self.path / LOCK).open("a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise KernelskillError(f"run {self.id}: in use by another process") from exc
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def write_candidate(self, step: str, source: str) -> str:
        """Store a candidate's source, every secret in it redacted (a key the LLM echoed); return its path
        relative to the run folder. The stored file is what is evaluated, so nothing else ever holds the raw
        text."""
        rel = f"{CANDIDATES}/{step_filename(step)}"
        # readable by the sandbox's user whatever the umask (as root it is uid 65534, docs/SECURITY.md); the
        # run folder's own mode still keeps it from other users
        write_text_atomic(self.path / rel, current().text(source), mode=SANDBOX_READABLE)
        return rel

    def read(self, rel: str) -> str:
        """A file of the run (a candidate), read within :data:`MAX_RUN_FILE_BYTES`."""
        data, problem = read_bounded(self.path / rel, MAX_RUN_FILE_BYTES)
        if data is None:
            raise KernelskillError(f"{self.path / rel}: {problem or 'no such file'}")
        return data.decode("utf-8", "replace")

    def write_output(self, name: str, text: str) -> Path:
        """Write a file of the run (a report, ``best.py``, a profile) with every secret redacted."""
        target = self.path / name
        write_text_atomic(target, current().text(text), mode=SANDBOX_READABLE)  # best.py is a candidate too
        return target

    def status(self) -> str:
        types = {e["type"] for e in self.log.events}
        if "run_finished" in types:
            return "finished"
        if "run_paused" in types and self.log.events[-1]["type"] == "run_paused":
            return "paused"
        return "incomplete" if types else "new"


class RunStore:
    """The folder that holds runs (``settings.runs_dir``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def create(self, task_file: Path, manifest: dict[str, Any], run_id: str | None = None) -> Run:
        run_id = run_id or new_run_id(task_file)
        path = self.root / run_id
        if path.exists():
            raise KernelskillError(f"{path}: run already exists")
        path.mkdir(parents=True)
        shutil.copyfile(task_file, path / TASK)
        os.chmod(path / TASK, SANDBOX_READABLE)  # every evaluation's worker reads it (see write_candidate)
        body = {"id": run_id, "created": utcnow(), "task": TASK, "task_name": task_file.name, **manifest}
        (path / MANIFEST).write_text(json.dumps(body, indent=2, default=str) + "\n")
        return Run(path)

    def open(self, run: str | Path) -> Run:
        """A run by id (under the store) or by folder path."""
        candidate = Path(run)
        for path in (self.root / str(run), candidate):
            if (path / MANIFEST).is_file():
                return Run(path)
        raise KernelskillError(f"run {run}: not found under {self.root} (no {MANIFEST})")

    def list(self) -> list[Run]:
        if not self.root.is_dir():
            return []
        runs: list[Run] = []
        for p in sorted(self.root.iterdir()):
            if not (p / MANIFEST).is_file():
                continue
            if not is_run_id(p.name):  # made by hand: a name with control characters is never printed raw
                log.warning("skipping %s: not a run id", display(p.name))
                continue
            try:
                run = Run(p)
                run.manifest  # noqa: B018 - a manifest that does not load (or is too large) is found here
                runs.append(run)
            except KernelskillError as exc:  # one broken run does not hide the others
                log.warning("skipping run %s: %s", display(p.name), exc)
        return runs


