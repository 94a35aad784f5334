"""File hand-off between a run and whoever answers its steps on another side.

A run that cannot answer a step itself (an LLM step with no API key, a GPU step on a machine without
CUDA) posts a *request* into ``<run>/exchange/`` and pauses. Someone else (a person, a coding agent, a
GPU box) writes the *answer* next to it, and the run picks it up when it resumes.

Layout, all relative to the run folder so that it can be copied between machines::

    exchange/<id>.request.json   what is asked: kind (llm | gpu), role, payload, expected answer
    exchange/<id>.prompt.md      llm requests: the prompt, readable by a person
    exchange/<id>.answer.json    the answer: {"id", "text" | "result", "answered_by", "answered_at"}

Writes are atomic (temp file + rename) so a reader never sees half a file. This module uses the
standard library only: the GPU side imports it on a bare box.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.bounds import decode_text, text_problem

log = logging.getLogger(__name__)

Kind = Literal["llm", "gpu"]
EXCHANGE_DIR = "exchange"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class ExchangeError(KernelskillError):
    """A request or answer that cannot be accepted; the message says why."""


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Request:
    id: str
    kind: Kind
    role: str
    payload: dict[str, Any] = field(default_factory=dict)
    expects: dict[str, Any] = field(default_factory=dict)  # llm: JSON schema or {"code": "ModelNew"}
    created_at: str = field(default_factory=_now)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Request:
        return cls(**{k: data[k] for k in ("id", "kind", "role", "payload", "expects", "created_at") if k in data})


@dataclass
class Answer:
    id: str
    text: str | None = None  # llm answers
    result: dict[str, Any] | None = None  # gpu answers (an EvalResult dict)
    answered_by: str = "unknown"
    answered_at: str = field(default_factory=_now)


def read_answer_file(data: bytes, source: str) -> str:
    """The text of an answer file: UTF-8 within the size bound, else a one-line :class:`ExchangeError`."""
    text, problem = decode_text(data, source)
    if text is None:
        raise ExchangeError(f"{problem} (nothing stored; the run still waits for it)")
    return text


class Exchange:
    """The request/answer folder of one run."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.dir = self.run_dir / EXCHANGE_DIR

    # paths -------------------------------------------------------------------------------
    def _request_path(self, rid: str) -> Path:
        return self.dir / f"{rid}.request.json"

    def _prompt_path(self, rid: str) -> Path:
        return self.dir / f"{rid}.prompt.md"

    def _answer_path(self, rid: str) -> Path:
        return self.dir / f"{rid}.answer.json"

    @staticmethod
    def check_id(rid: str) -> str:
        if not _ID_RE.match(rid):
            raise ExchangeError(f"request id {rid!r} must be letters, digits, '_', '.', '-'")
        return rid

    # the asking side ---------------------------------------------------------------------
    def post(self, request: Request, prompt: str | None = None) -> Path:
        """Write a request (idempotent: re-posting the same id keeps the first request)."""
        self.check_id(request.id)
        path = self._request_path(request.id)
        if path.exists():
            return path
        if prompt is not None:
            atomic_write_text(self._prompt_path(request.id), prompt)
        atomic_write_text(path, json.dumps(asdict(request), indent=2, sort_keys=True))
        log.info("posted %s request %s (%s)", request.kind, request.id, request.role)
        return path

    def answer_for(self, rid: str) -> Answer | None:
        """The stored answer of ``rid``; None when there is none, or when the file cannot be read as one
        (it is then set aside, and the step waits for a new answer)."""
        path = self._answer_path(rid)
        if not path.is_file():
            return None
        text, problem = decode_text(path.read_bytes(), str(path))
        data: Any = None
        if text is not None:
            try:
                data = json.loads(text)
            except (ValueError, RecursionError) as exc:
                problem = f"{path.name}: not JSON ({' '.join(str(exc).split())[:120]})"
        if data is not None and not (isinstance(data, dict) and set(data) <= set(Answer.__dataclass_fields__)
                                     and isinstance(data.get("id"), str)):
            problem = f"{path.name}: not an answer record"
        if problem:
            log.warning("%s; set aside", problem)
            self.set_aside(rid, problem)
            return None
        return Answer(**data)

    def set_aside(self, rid: str, reason: str) -> None:
        """Move an unusable answer file out of the way (kept for inspection as ``<id>.answer.refused``)."""
        path = self._answer_path(rid)
        if path.exists():
            os.replace(path, path.with_name(f"{rid}.answer.refused"))
            log.info("answer of %s set aside: %s", rid, reason)

    # the answering side ------------------------------------------------------------------
    def request(self, rid: str) -> Request:
        path = self._request_path(self.check_id(rid))
        if not path.is_file():
            raise ExchangeError(f"{self.run_dir.name}: no request {rid!r} (see `kernelskill runs pending`)")
        return Request.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def prompt(self, rid: str) -> str | None:
        path = self._prompt_path(rid)
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def requests(self) -> Iterator[Request]:
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("*.request.json")):
            yield Request.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def pending(self, kind: Kind | None = None) -> list[Request]:
        return [r for r in self.requests()
                if (kind is None or r.kind == kind) and not self._answer_path(r.id).exists()]

    def put_answer(self, answer: Answer) -> Path:
        """Store an answer that the caller has already validated. An answer is final once written."""
        req = self.request(answer.id)
        path = self._answer_path(req.id)
        if path.exists():
            raise ExchangeError(f"request {req.id!r} is already answered")
        if req.kind == "llm" and answer.text is None:
            raise ExchangeError(f"request {req.id!r} is an llm step: the answer needs text")
        if req.kind == "gpu" and answer.result is None:
            raise ExchangeError(f"request {req.id!r} is a gpu step: the answer needs a result")
        problem = text_problem(answer.text) if answer.text is not None else ""
        if problem:
            raise ExchangeError(f"request {req.id!r}: the answer is refused: {problem}")
        atomic_write_text(path, json.dumps(asdict(answer), indent=2, sort_keys=True))
        log.info("answered %s", req.id)
        return path
