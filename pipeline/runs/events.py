"""The append-only event log of a run: one JSON line per event, the resume point of every step.

See the package docstring for the layout and the event format.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.bounds import MAX_EVENT_LOG_BYTES, MAX_EVENT_LOG_LINES, read_bounded
from kernelskill.pipeline.runs.redact import Redactor, current

log = logging.getLogger(__name__)



EVENTS = "events.jsonl"
MANIFEST = "run.json"
TASK = "task.py"
CANDIDATES = "candidates"
LOCK = ".lock"
STEP_KINDS = ("llm", "kb", "gpu", "loop")
#: which machine a step kind needs in a split run: LLM side (keys, the KB) or GPU side.
SIDE = {"llm": "llm", "kb": "llm", "gpu": "gpu", "loop": "any"}


class Paused(KernelskillError):
    """The loop stopped before a step of a side it was told not to run, or one that waits for an answer
    file (the ``exchange`` LLM provider). ``request`` says what it waits for (JSON, run-relative)."""

    exit_code = 3

    def __init__(self, step: str, side: str, request: dict[str, Any] | None = None) -> None:
        super().__init__(f"paused before {side} step {step}")
        self.step, self.side, self.request = step, side, request


def utcnow() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_run_id(task_path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", task_path.stem)[:40].strip("-") or "task"
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stem}-{stamp}-{secrets.token_hex(2)}"


def step_filename(step: str) -> str:
    """``r03.optimize`` -> ``r03.optimize.py`` (a plain name, safe on every filesystem)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", step).strip("_") + ".py"


class EventLog:
    """Append-only JSONL with fsync per event; readers skip a torn last line."""

    def __init__(self, path: Path, *, scrub: dict[str, str] | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        #: text -> replacement, longest first (absolute paths -> ".", the host name -> "<host>")
        self._scrub = sorted(((k, v) for k, v in (scrub or {}).items() if k and len(k) > 1),
                             key=lambda kv: len(kv[0]), reverse=True)
        self._events: list[dict[str, Any]] = list(self._read())
        self._by_step: dict[tuple[str, str], dict[str, Any]] = {}
        for event in self._events:
            if event.get("step"):
                self._by_step.setdefault((event["step"], event["type"]), event)

    # reading --------------------------------------------------------------------------------
    def _read(self) -> Iterator[dict[str, Any]]:
        """The events, within :data:`MAX_EVENT_LOG_BYTES` and :data:`MAX_EVENT_LOG_LINES` (the size is looked at
        before anything is read: a log over them is refused in one line, never read whole)."""
        data, problem = read_bounded(self.path, MAX_EVENT_LOG_BYTES)
        if data is None:
            if problem:
                raise KernelskillError(f"{self.path}: {problem}, more than a run's event log may hold; not read")
            return
        if data.count(b"\n") > MAX_EVENT_LOG_LINES:
            raise KernelskillError(f"{self.path}: more than {MAX_EVENT_LOG_LINES:,} events, more than a run's "
                                   "event log may hold; not read")
        lines = data.split(b"\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
                if number == len(lines):  # the torn tail of a killed writer
                    log.warning("%s: ignoring a cut-off last line", self.path)
                    continue
                raise KernelskillError(f"{self.path}:{number}: not a JSON event: {exc}") from exc

    @property
    def events(self) -> list[dict[str, Any]]:
        return list(self._events)

    def find(self, step: str, type_: str) -> dict[str, Any] | None:
        """The first event of ``type_`` recorded for ``step``, if any."""
        return self._by_step.get((step, type_))

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self._events if e.get("type") == type_]

    # writing --------------------------------------------------------------------------------
    def _clean(self, value: Any, redactor: Redactor | None = None) -> Any:
        redactor = redactor or current()
        if isinstance(value, str):
            for needle, replacement in self._scrub:
                value = value.replace(needle, replacement)
            return redactor.text(value)
        if isinstance(value, dict):
            return {str(k): self._clean(v, redactor) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v, redactor) for v in value]
        return value

    def scrub(self, value: Any) -> Any:
        """``value`` with this machine's paths and host name replaced and every secret redacted
        (:mod:`.redact`), as every event is stored."""
        return self._clean(value)

    def append(self, kind: str, type_: str, data: dict[str, Any] | None = None, *,
               step: str | None = None, round_: int | None = None) -> dict[str, Any]:
        if kind not in STEP_KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        with self._lock:
            event = {"seq": len(self._events) + 1, "ts": utcnow(), "kind": kind, "type": type_,
                     "step": step, "round": round_, "data": self._clean(data or {})}
            line = (json.dumps(event, ensure_ascii=False, default=str) + "\n").encode()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._trim_torn_tail()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._events.append(event)
            if step:
                self._by_step.setdefault((step, type_), event)
            return event

    def _trim_torn_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            cut = data.rfind(b"\n") + 1
            fh.truncate(cut)
            log.warning("%s: removed a cut-off last line before appending", self.path)


