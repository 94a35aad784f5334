"""The result channel of a harness worker: how a verdict reaches the parent, and how a forged one is told apart.

The worker writes to an inherited pipe (never a file): one line per stage as it enters it
(``S <stage>``), then one final record::

    R <length> <sha256 of the payload>
    {"nonce": ..., "stages": [...], "result": {...}}

The nonce is fresh for each job and reaches the worker on its stdin, before the candidate is imported.
The parent (:func:`read`) accepts the result only when the channel holds exactly the stage lines and
one complete record after them, with the job's nonce, a payload that matches its digest, a stage list
equal to the stages streamed, and, for a passing evaluation, the stages that decide a pass in their
order. Anything else is either missing (the worker died: the candidate's runtime error) or a forgery
(bytes the harness does not write, another nonce, a second record: the candidate's cheat).

What this does not stop: the candidate runs in the worker's own process, so it can find the channel's
descriptor and read the nonce from the worker's memory; a candidate that reimplements this protocol
and the whole evaluation's stage sequence can still write a record. docs/SECURITY.md says so.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .results import STATUSES

STAGE_RE = re.compile(r"[A-Za-z0-9_]{1,64}")
#: the record's header line, as the worker writes it
HEADER_RE = re.compile(rb"R (\d{1,12}) ([0-9a-f]{64})")
#: a verdict file the worker once wrote into its work folder; finding one now means a forgery
FORGED_FILE_RE = re.compile(r"result.*\.json.*", re.IGNORECASE)
#: the profiled worker's own output (the profiler's output is the worker process's stdout)
WORKER_LOG = "worker.log"
#: the most of the output scanned for a printed verdict
SCAN_LIMIT = 8 * 2**20


def _write_all(fd: int, data: bytes) -> None:
    if fd < 0:  # no channel (a profiler that closed it): the parent sees no record
        return
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Writer:
    """The worker's end: stage lines as they happen, then the one record."""

    def __init__(self, fd: int, nonce: str) -> None:
        self.fd = fd
        self._nonce = nonce
        self.stages: list[str] = []

    def stage(self, name: str) -> None:
        if not STAGE_RE.fullmatch(name):
            name = re.sub(r"[^A-Za-z0-9_]", "_", name)[:64] or "stage"
        self.stages.append(name)
        _write_all(self.fd, b"S " + name.encode() + b"\n")

    def record(self, result: dict[str, Any]) -> None:
        payload = json.dumps({"nonce": self._nonce, "stages": self.stages, "result": result},
                             default=str).encode()
        digest = hashlib.sha256(payload).hexdigest()
        _write_all(self.fd, f"R {len(payload)} {digest}\n".encode() + payload)
        if self.fd >= 0:
            os.close(self.fd)


@dataclass
class Reading:
    """What the parent made of the channel: a result, or why there is none (``problem``), and the evidence
    of a forgery (``forged``, empty when none was found)."""

    result: dict[str, Any] | None
    stages: list[str] = field(default_factory=list)
    problem: str = ""
    forged: str = ""


def required_stages(mode: str, result: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The stages a passing verdict must have gone through, in order (evaluation only)."""
    if mode != "evaluate" or result.get("status") != "ok":
        return []
    trials = int(config.get("correctness_trials", 0) or 0)
    out = ["import_candidate", "first_forward", *[f"correctness_trial_{i}" for i in range(trials)]]
    if config.get("time", True):
        out.append("timing")
    return out


def read(data: bytes, nonce: str, *, mode: str, config: dict[str, Any] | None = None) -> Reading:
    """Check what the worker wrote to the channel; see the module's text for what is accepted."""
    stages: list[str] = []
    body: bytes | None = None
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            return Reading(None, stages, problem="the channel ends in the middle of a line (the worker died)")
        line = data[pos:nl]
        if line.startswith(b"S "):
            name = line[2:].decode("utf-8", "replace")
            if body is not None:
                return Reading(None, stages, forged="a stage line after the final record")
            if not STAGE_RE.fullmatch(name):
                return Reading(None, stages, forged="a stage line the harness does not write")
            stages.append(name)
            pos = nl + 1
            continue
        header = HEADER_RE.fullmatch(line)
        if header is None:
            return Reading(None, stages, forged="bytes on the result channel that the harness does not write")
        if body is not None:
            return Reading(None, stages, forged="a second record on the result channel")
        n = int(header.group(1))
        body = data[nl + 1: nl + 1 + n]
        if len(body) < n:
            return Reading(None, stages, problem="the record is cut off (the worker died while writing it)")
        if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), header.group(2).decode()):
            return Reading(None, stages, forged="a record whose digest does not match its payload")
        pos = nl + 1 + n
    if body is None:
        return Reading(None, stages, problem="no record on the result channel (the worker died)")
    try:
        payload = json.loads(body)
    except ValueError:
        return Reading(None, stages, forged="a record that is not JSON")
    if not isinstance(payload, dict) or not isinstance(payload.get("result"), dict):
        return Reading(None, stages, forged="a record without a result object")
    if not hmac.compare_digest(str(payload.get("nonce", "")).encode(), nonce.encode()):
        return Reading(None, stages, forged="a record with another job's nonce")
    if payload.get("stages") != stages:
        return Reading(None, stages, forged="a record whose stage list differs from the stages the worker went through")
    result = payload["result"]
    required = required_stages(mode, result, config or {})
    where = [stages.index(s) if s in stages else -1 for s in required]
    if any(i < 0 for i in where) or where != sorted(where):
        missing = [s for s, i in zip(required, where, strict=True) if i < 0]
        return Reading(None, stages, forged="a passing verdict without the stages that decide it"
                       + (f" ({', '.join(missing[:4])} missing)" if missing else " (out of order)"))
    return Reading(result, stages)


def forged_files(workdir: Path) -> list[str]:
    """Verdict-looking files the candidate left in its work folder (the harness writes none)."""
    try:
        return sorted(p.name for p in workdir.iterdir() if FORGED_FILE_RE.fullmatch(p.name))
    except OSError:
        return []


def printed_verdict(output: str) -> str:
    """A verdict printed by the candidate on stdout or stderr: a record header or a result object."""
    for line in output[-SCAN_LIMIT:].splitlines():
        text = line.strip()
        if HEADER_RE.fullmatch(text.encode("utf-8", "replace")):
            return "a result-channel record printed on stdout"
        if text.startswith("{") and '"status"' in text:
            try:
                obj = json.loads(text)
            except ValueError:
                continue
            if isinstance(obj, dict) and (obj.get("status") in STATUSES or "ok" in obj):
                return "a result object printed on stdout"
    return ""


__all__ = ["WORKER_LOG", "Reading", "Writer", "forged_files", "printed_verdict", "read", "required_stages"]
