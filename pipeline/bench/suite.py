"""The suite folder: ``suite.json`` (what the suite is) and ``runs/`` (one run folder per task).

The manifest is written once when the suite is made (atomically: a kill leaves the old file or the new
one); every fact a suite produces lives in its runs' own event logs. Run ids are fixed by the task's
position and name (``003-L1_19_ReLU``), so a suite started again after a kill finds the same run
folders and resumes each from its log: nothing recorded is asked or evaluated again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

from kernelskill.atomic_file import write_text_atomic
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.bench.tasks import TaskRef
from kernelskill.pipeline.runs import EVENTS, MANIFEST, Run, RunStore, utcnow

log = logging.getLogger(__name__)

SUITE_MANIFEST = "suite.json"
SESSIONS = "sessions.jsonl"  # one line per start of the suite's command: who ran its GPU steps, how busy
RUNS = "runs"
#: options that make a suite what it is: starting the same folder with others is refused
IDENTITY = ("kind", "protocol", "baseline", "knowledge", "candidate_format", "model", "provider", "precision")


def _identity(options: dict[str, Any], key: str) -> Any:
    """An identity option as suites compare it: a suite made before ``precision`` existed ran in fp32."""
    value = options.get(key)
    return (value or "fp32") if key == "precision" else value


def _readable(file: Path) -> bool:
    try:
        json.loads(file.read_text())
    except (OSError, ValueError):
        return False
    return True


def run_id_for(index: int, name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:60] or "task"
    return f"{index:03d}-{slug}"


def default_name(kind: str, tasks: list[TaskRef], options: dict[str, Any]) -> str:
    """A name fixed by what is run, so the same command finds the same folder again."""
    ident = {k: options.get(k) for k in IDENTITY if k != "precision"}
    if _identity(options, "precision") != "fp32":  # fp32 suites keep the names they had before the precision
        ident["precision"] = options["precision"]
    key = json.dumps({"kind": kind, "tasks": [t.name for t in tasks], "options": ident}, sort_keys=True)
    return f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a file appended to line by line (a line cut off by a kill is skipped with a warning);
    none when the file is not there."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            log.warning("%s: a cut-off line is skipped", path)
    return out


class Suite:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def runs_dir(self) -> Path:
        return self.path / RUNS

    @property
    def manifest(self) -> dict[str, Any]:
        file = self.path / SUITE_MANIFEST
        try:
            return json.loads(file.read_text())
        except FileNotFoundError as exc:
            raise KernelskillError(f"{self.path}: not a suite folder (no {SUITE_MANIFEST})") from exc
        except json.JSONDecodeError as exc:
            raise KernelskillError(f"{file}:{exc.lineno}: invalid JSON: {exc.msg}") from exc

    @property
    def tasks(self) -> list[dict[str, Any]]:
        return list(self.manifest.get("tasks") or [])

    @classmethod
    def open(cls, path: Path) -> Suite:
        suite = cls(path)
        suite.manifest  # noqa: B018 - raises when it is not a suite
        return suite

    @classmethod
    def create_or_resume(cls, path: Path, kind: str, tasks: list[TaskRef], options: dict[str, Any]) -> Suite:
        """The suite at ``path``: made now, or the one a previous start made with the same tasks and options."""
        suite = cls(path)
        entries = [t.to_dict() | {"run_id": None if t.error else run_id_for(i, t.name)}
                   for i, t in enumerate(tasks, start=1)]
        if (suite.path / SUITE_MANIFEST).is_file():
            old = suite.manifest
            if [t["name"] for t in old.get("tasks", [])] != [t["name"] for t in entries] or old.get("kind") != kind:
                raise KernelskillError(f"{suite.path}: this suite was started with other tasks; give another "
                                       "--suite folder or the same tasks")
            changed = [k for k in IDENTITY if k in options
                       and _identity(old.get("options", {}), k) != _identity(options, k)]
            if changed:
                before = ", ".join(f"{k}={old['options'].get(k)!r}" for k in changed)
                raise KernelskillError(f"{suite.path}: this suite was started with other {', '.join(changed)} "
                                       f"({before}); give another --suite folder")
            return suite
        suite.path.mkdir(parents=True, exist_ok=True)
        body = {"kind": kind, "created": utcnow(), "options": options, "tasks": entries}
        write_text_atomic(suite.path / SUITE_MANIFEST, json.dumps(body, indent=2, default=str) + "\n")
        return suite

    # sessions -----------------------------------------------------------------------------------------
    def record_session(self, line: dict[str, Any]) -> None:
        """Append one start's record (evaluator, device, slots, wall and busy seconds, retries)."""
        with (self.path / SESSIONS).open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, default=str, sort_keys=True) + "\n")

    @property
    def sessions(self) -> list[dict[str, Any]]:
        """Every recorded start, oldest first (a line cut off by a kill is skipped)."""
        return json_lines(self.path / SESSIONS)

    # runs ---------------------------------------------------------------------------------------------
    def run_for(self, entry: dict[str, Any], run_manifest: dict[str, Any]) -> Run:
        """The run folder of a task: opened when it exists, made (with a copy of the task) otherwise."""
        path = self.runs_dir / entry["run_id"]
        if (path / MANIFEST).is_file() and (_readable(path / MANIFEST) or (path / EVENTS).is_file()):
            return Run(path)
        if path.exists():  # made by a start killed before its manifest was whole: nothing ran in it
            shutil.rmtree(path)
        return RunStore(self.runs_dir).create(Path(entry["path"]), run_manifest, run_id=entry["run_id"])

    def runs(self) -> list[tuple[dict[str, Any], Run | None]]:
        """Every task of the manifest with its run folder (None for a failed task or one not started)."""
        out = []
        for entry in self.tasks:
            path = self.runs_dir / entry["run_id"] if entry.get("run_id") else None
            out.append((entry, Run(path) if path is not None and (path / MANIFEST).is_file() else None))
        return out
