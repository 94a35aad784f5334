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
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelskill.atomic_file import write_text_atomic
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.bounds import (
    MAX_ANSWER_FILE_BYTES,
    decode_text,
    loads_json,
    read_bounded,
    text_problem,
)
from kernelskill.pipeline.runs.portable import display
from kernelskill.pipeline.runs.redact import current

log = logging.getLogger(__name__)

Kind = Literal["llm", "gpu"]
EXCHANGE_DIR = "exchange"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
#: a request holds a whole prompt (the conversation so far): larger than an answer, still bounded
MAX_REQUEST_FILE_BYTES = 16 * MAX_ANSWER_FILE_BYTES
#: one line per answer file set aside: when, which file, its new name, why
REJECTED_LOG = "rejected.log"


class ExchangeError(KernelskillError):
    """A request or answer that cannot be accepted; the message says why."""


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
        redactor = current()  # a request is read by whoever answers it: no secret goes into one
        if prompt is not None:
            write_text_atomic(self._prompt_path(request.id), redactor.text(prompt))
        write_text_atomic(path, json.dumps(redactor.value(asdict(request)), indent=2, sort_keys=True))
        log.info("posted %s request %s (%s)", request.kind, request.id, request.role)
        return path

    def answer_for(self, rid: str, kind: Kind | None = None) -> Answer | None:
        """The stored answer of ``rid``; None when there is none, or when the file is not a valid answer for
        that step (it is then set aside with its reason, and the step waits for a new answer).

        Valid: a regular file (not a folder, a link or a device) of at most ``MAX_ANSWER_FILE_BYTES``, UTF-8
        JSON, an object of the answer's fields whose ``id`` is ``rid``; for an LLM step (``kind``, else the
        kind of the posted request) a non-empty ``text`` within the bounds, for a GPU step a ``result``
        object."""
        path = self._answer_path(self.check_id(rid))
        data, problem = read_bounded(path, MAX_ANSWER_FILE_BYTES)
        if data is None and not problem:
            return None  # no answer yet
        answer: Answer | None = None
        if data is not None:
            answer, problem = self._parse_answer(rid, data, kind or self._kind_of(rid))
        if answer is None:
            log.warning("%s: %s; set aside, the step waits for a new answer", path.name, problem)
            self.set_aside(rid, problem)
        return answer

    def _kind_of(self, rid: str) -> Kind | None:
        try:
            return self.request(rid).kind
        except ExchangeError:
            return None  # an answer placed before its request: checked against both shapes

    @staticmethod
    def _parse_answer(rid: str, data: bytes, kind: Kind | None) -> tuple[Answer | None, str]:
        """``(answer, "")`` or ``(None, reason)`` for the bytes of an answer file."""
        text, problem = decode_text(data, f"{rid}.answer.json")
        if text is None:
            return None, problem
        try:  # at most MAX_ANSWER_FILE_BYTES: the brackets inside the text are the text's business
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            return None, f"not JSON ({' '.join(str(exc).split())[:120]})"
        fields = Answer.__dataclass_fields__
        if not isinstance(value, dict) or not set(value) <= set(fields):
            extra = sorted(set(value) - set(fields)) if isinstance(value, dict) else []
            return None, "not an answer record" + (f" (unknown fields {', '.join(map(str, extra))[:80]})"
                                                   if extra else "")
        if value.get("id") != rid:
            return None, f"its id {display(str(value.get('id')))!r} is not this step's ({rid!r})"
        for name, types in (("text", str), ("result", dict), ("answered_by", str), ("answered_at", str)):
            if value.get(name) is not None and not isinstance(value[name], types):
                return None, f"{name} is a {type(value[name]).__name__}, not a {types.__name__}"
        llm_ok = isinstance(value.get("text"), str) and value["text"].strip() != ""
        gpu_ok = isinstance(value.get("result"), dict)
        if kind == "llm" and not llm_ok:
            return None, "an LLM step's answer needs a non-empty text"
        if kind == "gpu" and not gpu_ok:
            return None, "a GPU step's answer needs a result object"
        if kind is None and not (llm_ok or gpu_ok):
            return None, "the answer has neither a text nor a result"
        if llm_ok and kind != "gpu":
            problem = text_problem(value["text"])
            if problem:
                return None, problem
        return Answer(**value), ""

    def set_aside(self, rid: str, reason: str) -> Path | None:
        """Move an unusable answer (a file, a folder or a link) out of the way as
        ``<id>.answer.json.rejected-<n>`` and note why in ``exchange/rejected.log``; returns the new path."""
        path = self._answer_path(rid)
        if not os.path.lexists(path):
            return None
        n = 1
        while os.path.lexists(path.with_name(f"{path.name}.rejected-{n}")):
            n += 1
        target = path.with_name(f"{path.name}.rejected-{n}")
        os.rename(path, target)
        line = f"{_now()} {path.name} -> {target.name}: {display(' '.join(reason.split()), 300)}\n"
        with (self.dir / REJECTED_LOG).open("a", encoding="utf-8") as fh:
            fh.write(line)
        log.info("answer of %s set aside as %s: %s", rid, target.name, reason)
        return target

    # the answering side ------------------------------------------------------------------
    def request(self, rid: str) -> Request:
        path = self._request_path(self.check_id(rid))
        data, problem = read_bounded(path, MAX_REQUEST_FILE_BYTES)
        if data is None and not problem:
            raise ExchangeError(f"{self.run_dir.name}: no request {rid!r} (see `kernelskill runs pending`)")
        request, problem = (None, problem) if data is None else self._parse_request(rid, data)
        if request is None:
            raise ExchangeError(f"{self.run_dir.name}: {path.name}: {problem}")
        return request

    @staticmethod
    def _parse_request(rid: str, data: bytes) -> tuple[Request | None, str]:
        text, problem = decode_text(data, f"{rid}.request.json", MAX_REQUEST_FILE_BYTES)
        if text is None:
            return None, problem
        value, problem = loads_json(text, max_chars=MAX_REQUEST_FILE_BYTES)
        if problem:
            return None, f"not JSON: {problem}"
        if not (isinstance(value, dict) and value.get("id") == rid and value.get("kind") in ("llm", "gpu")
                and isinstance(value.get("role"), str) and isinstance(value.get("payload", {}), dict)
                and isinstance(value.get("expects", {}), dict)):
            return None, "not a request record for this step"
        return Request.from_dict(value), ""

    def prompt(self, rid: str) -> str | None:
        data, _ = read_bounded(self._prompt_path(self.check_id(rid)), MAX_REQUEST_FILE_BYTES)
        return data.decode("utf-8", "replace") if data is not None else None

    def requests(self) -> Iterator[Request]:
        """Every posted request; a request file damaged by hand is skipped with a warning."""
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("*.request.json")):
            rid = path.name[: -len(".request.json")]
            try:
                yield self.request(rid)
            except ExchangeError as exc:
                log.warning("%s", exc)

    def pending(self, kind: Kind | None = None) -> list[Request]:
        """The requests without a valid answer (an invalid one is set aside here, so the step shows as
        waiting)."""
        return [r for r in self.requests()
                if (kind is None or r.kind == kind) and self.answer_for(r.id, r.kind) is None]

    def put_answer(self, answer: Answer) -> Path:
        """Store an answer that the caller has already validated. An answer is final once written."""
        req = self.request(answer.id)
        path = self._answer_path(req.id)
        if self.answer_for(req.id, req.kind) is not None:  # an unusable file there is set aside first
            raise ExchangeError(f"request {req.id!r} is already answered")
        if req.kind == "llm" and answer.text is None:
            raise ExchangeError(f"request {req.id!r} is an llm step: the answer needs text")
        if req.kind == "gpu" and answer.result is None:
            raise ExchangeError(f"request {req.id!r} is a gpu step: the answer needs a result")
        problem = text_problem(answer.text) if answer.text is not None else ""
        if problem:
            raise ExchangeError(f"request {req.id!r}: the answer is refused: {problem}")
        write_text_atomic(path, json.dumps(asdict(answer), indent=2, sort_keys=True))
        log.info("answered %s", req.id)
        return path
