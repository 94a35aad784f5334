"""The LLM client: any OpenAI-compatible endpoint through the ``openai`` package.

- bounded retries with exponential backoff on 429, 5xx, timeouts and broken responses;
- token and cost accounting per call (USD per million tokens from ``settings.llm.prices[model]``);
- every call is appended to the run's event log (``kind: llm``, ``type: llm_call``) with its
  messages, answer, usage, cost and latency;
- a call made for a ``step`` that the log already answers is served from the log, never re-requested
  (this is how ``--resume`` avoids paying twice);
- ``provider = "replay"`` answers every step from another recorded run (``base_url`` names that run's
  folder), so a trajectory can be re-run at no cost;
- ``provider = "exchange"`` needs no key or endpoint: each request is posted into the run folder
  (``exchange/<step>.prompt.md`` + ``.request.json``, with the expected answer shape) and the run pauses
  (:class:`~kernelskill.pipeline.runs.Paused`) until ``kernelskill runs answer`` stores an answer.
  An answer file in ``exchange/`` answers its step whatever the provider of the resumed run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelskill.config import LLMSettings
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs import EVENTS, EventLog, Paused
from kernelskill.pipeline.runs.answers import parse_json_answer
from kernelskill.pipeline.runs.bounds import text_problem
from kernelskill.pipeline.runs.exchange import Exchange, Request
from kernelskill.pipeline.runs.redact import redact, register

log = logging.getLogger(__name__)

STEP_HEADER = "X-Kernelskill-Step"
ROLE_HEADER = "X-Kernelskill-Role"
MAX_BACKOFF_S = 30.0


#: further providers by name: ``fn(client, role, messages, step) -> LLMResponse`` (e.g. the file
#: ``exchange``, which may raise the loop's ``Paused`` while it waits for an answer file).
#: A provider's answers are recorded and validated exactly like the API's.
PROVIDERS: dict[str, Callable[..., LLMResponse]] = {}


class LLMError(KernelskillError):
    """The endpoint failed for good (after retries) or answered something unusable."""


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class LLMResponse(BaseModel):
    text: str
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    request_id: str | None = None
    attempts: int = 1
    provider: str = "openai"
    faults: list[str] = Field(default_factory=list)  # what the retried attempts failed with
    from_log: bool = False  # served from the run's own log (resume) instead of a request
    answered_by: str | None = None  # who wrote an exchange answer (a person, an agent); None for a model


class Totals(BaseModel):
    calls: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


def cost_of(settings: LLMSettings, model: str, usage: Usage) -> float:
    price = settings.prices.get(model)
    if price is None:
        return 0.0
    return round((usage.prompt_tokens * price.input + usage.completion_tokens * price.output) / 1e6, 8)


class LLMClient:
    def __init__(self, settings: LLMSettings, *, log_: EventLog | None = None,
                 replay_from: EventLog | None = None) -> None:
        self.settings = settings
        self.log = log_
        self.provider = settings.provider
        register(settings.api_key, settings.resolved_api_key())  # a key from kernelskill.toml is a secret too
        self.replay_from = replay_from
        self.totals = Totals()
        self._client: Any = None
        self._auto_step = 0
        #: called with the step id before a request that the log cannot answer (the loop's stop points)
        self.before_request: Callable[[str], None] | None = None
        #: the expected answer shape and round of the request being made (read by file providers)
        self.pending_expects: dict[str, Any] | None = None
        self.pending_round: int | None = None
        if self.provider == "replay" and replay_from is None:
            raise KernelskillError("llm.provider replay: llm.base_url must name the recorded run folder")
        if self.provider not in ("openai", "replay", *PROVIDERS):
            raise KernelskillError(f"llm.provider: {self.provider!r} is not available here (choose "
                                   f"{', '.join(('openai', 'replay', *PROVIDERS))})")

    @classmethod
    def from_settings(cls, settings: LLMSettings, run_dir: Path | None = None) -> LLMClient:
        event_log = EventLog(Path(run_dir) / EVENTS) if run_dir is not None else None
        replay = None
        if settings.provider == "replay":
            if not settings.base_url:
                raise KernelskillError("llm.base_url: the replay provider needs the recorded run folder")
            source = Path(settings.base_url).expanduser()
            if not (source / EVENTS).is_file():
                raise KernelskillError(f"llm.base_url: {source} holds no {EVENTS} to replay")
            replay = EventLog(source / EVENTS)
        return cls(settings, log_=event_log, replay_from=replay)

    # The openai client ----------------------------------------------------------------------
    def _openai(self) -> Any:
        if self._client is None:
            from openai import OpenAI

            key = self.settings.resolved_api_key()
            if not key:
                raise KernelskillError(f"llm: no API key (set {self.settings.api_key_env} or "
                                       "KERNELSKILL_LLM_API_KEY; any value for a local server)")
            self._client = OpenAI(api_key=key, base_url=self.settings.base_url,
                                  timeout=self.settings.timeout_s, max_retries=0)
        return self._client

    def check_endpoint(self, timeout_s: float = 5.0) -> None:
        """One cheap request (models.list) so a bad endpoint fails before any work starts."""
        if self.provider == "replay" or self.provider in PROVIDERS:  # no endpoint to reach
            return
        import openai

        where = self.settings.base_url or "https://api.openai.com/v1"
        try:
            self._openai().with_options(timeout=timeout_s, max_retries=0).models.list()
        except openai.AuthenticationError as exc:
            raise KernelskillError(f"llm: {where}: the API key was rejected ({exc.status_code})") from exc
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise KernelskillError(f"llm: cannot reach {where}: {_reason(exc)}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 404:  # some servers have no /models; the endpoint still answers
                return
            raise KernelskillError(f"llm: {where}: models.list answered {exc.status_code}") from exc

    # Chat ------------------------------------------------------------------------------------
    def chat(self, role: str, messages: list[dict[str, str]], *, step: str | None = None,
             round_: int | None = None, expects: dict[str, Any] | None = None, **kw: Any) -> LLMResponse:
        """One answer for ``step``: from the run's log, from an answer file in its ``exchange/`` folder,
        or from the provider. ``expects`` (the answer's shape, see ``agents.code_expects``) travels with
        an exchange request so that whoever answers knows what is asked and ``runs answer`` can check it."""
        if step is None:
            self._auto_step += 1
            step = f"call.{role}.{self._auto_step}"
        messages = redact(messages)  # no secret is sent, posted or recorded (a key in an error message...)
        recorded = self._recorded(step)
        if recorded is not None:
            self.totals.calls += 1
            return _response_from_event(recorded, from_log=True)
        answered = self._exchange_answer(step)
        if answered is None and self.before_request is not None:
            self.before_request(step)
        self.pending_expects, self.pending_round = expects, round_
        if answered is not None:
            response = answered
        elif self.provider == "replay":
            response = self._replay(step)
        elif self.provider in PROVIDERS:
            response = PROVIDERS[self.provider](self, role, messages, step)
        else:
            try:
                response = self._bounded_request(role, messages, step, round_, **kw)
            except LLMError as exc:
                if self.log is not None:  # for analysis; the step stays unanswered and is asked again on resume
                    self.log.append("llm", "llm_error", {"role": role, "model": self.settings.model,
                                                         "error": str(exc)}, step=step, round_=round_)
                raise
        self.totals.calls += 1
        self.totals.prompt_tokens += response.usage.prompt_tokens
        self.totals.completion_tokens += response.usage.completion_tokens
        self.totals.cost_usd += response.cost_usd
        if self.log is not None:
            self.log.append("llm", "llm_call", {
                # an exchange answer was not written by the configured model: say who wrote it instead
                "role": role, "model": None if response.provider == "exchange" else self.settings.model,
                "provider": response.provider, "answered_by": response.answered_by, "messages": messages,
                "text": response.text, "usage": response.usage.model_dump(),
                "cost_usd": response.cost_usd, "latency_s": response.latency_s,
                "request_id": response.request_id, "attempts": response.attempts, "faults": response.faults,
            }, step=step, round_=round_)
        return response

    def _recorded(self, step: str) -> dict[str, Any] | None:
        """The recorded answer of ``step`` that is within bounds. A run written by an older version may
        hold an answer that no parser can take (thousands of nested brackets): it counts as unanswered,
        so the step is asked again instead of crashing every resume."""
        if self.log is None or self.log.find(step, "llm_call") is None:
            return None
        for event in self.log.of_type("llm_call"):
            if event.get("step") != step:
                continue
            problem = text_problem((event.get("data") or {}).get("text", ""))
            if not problem:
                return event
            log.warning("step %s: the recorded answer is refused (%s); asking again", step, problem)
        return None

    def _bounded_request(self, role: str, messages: list[dict[str, str]], step: str, round_: int | None,
                         **kw: Any) -> LLMResponse:
        """An API answer within bounds, or :class:`LLMError`: an answer outside them is never recorded as
        the step's answer; it is noted (``llm_refused``, size and reason only) and asked again."""
        reasons: list[str] = []
        for _ in range(max(0, self.settings.max_retries) + 1):
            response = self._request(role, messages, step, **kw)
            problem = text_problem(response.text)
            if not problem:
                return response
            reasons.append(problem)
            if self.log is not None:
                self.log.append("llm", "llm_refused", {"role": role, "model": self.settings.model,
                                                       "reason": problem, "chars": len(response.text)},
                                step=step, round_=round_)
            log.warning("llm %s %s: answer refused (%s); asking again", role, step, problem)
        raise LLMError(f"llm: {role} ({step}): every answer was outside the bounds: {'; '.join(reasons)}")

    def _exchange(self) -> Exchange | None:
        return Exchange(self.log.path.parent) if self.log is not None else None

    def _exchange_answer(self, step: str) -> LLMResponse | None:
        exchange = self._exchange()
        answer = exchange.answer_for(step) if exchange is not None else None
        if answer is None or answer.text is None:
            return None
        problem = text_problem(answer.text)
        if problem:  # written by hand or by an older version: the step still waits for an answer
            log.warning("step %s: the answer file is refused (%s); the step waits for a new answer", step, problem)
            exchange.set_aside(step, problem)
            return None
        return LLMResponse(text=answer.text, provider="exchange", request_id=f"exchange:{step}",
                           answered_by=answer.answered_by)

    def _replay(self, step: str) -> LLMResponse:
        assert self.replay_from is not None
        event = self.replay_from.find(step, "llm_call")
        if event is None:
            raise LLMError(f"replay: {self.replay_from.path}: no recorded answer for step {step}")
        response = _response_from_event(event, from_log=False)
        problem = text_problem(response.text)
        if problem:
            raise LLMError(f"replay: {self.replay_from.path}: the recorded answer of {step} is refused: {problem}")
        return response.model_copy(update={"provider": "replay", "cost_usd": 0.0, "latency_s": 0.0})

    def _request(self, role: str, messages: list[dict[str, str]], step: str, **kw: Any) -> LLMResponse:
        import openai

        client = self._openai()
        retries = max(0, self.settings.max_retries)
        faults: list[str] = []
        for attempt in range(retries + 1):
            self.totals.requests += 1
            start = time.monotonic()
            try:
                completion = client.chat.completions.create(
                    model=kw.get("model", self.settings.model), messages=messages,
                    temperature=kw.get("temperature", self.settings.temperature),
                    max_tokens=kw.get("max_tokens", self.settings.max_tokens),
                    extra_headers={STEP_HEADER: step, ROLE_HEADER: role})
            except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                    openai.APIConnectionError, openai.APIResponseValidationError,
                    json.JSONDecodeError) as exc:  # a broken body (a proxy's error page) is transient too
                faults.append(_reason(exc))
                if attempt == retries:
                    raise LLMError(f"llm: {role} ({step}): gave up after {attempt + 1} attempts: "
                                   f"{'; '.join(faults)}") from exc
                delay = _retry_after(exc) or self.settings.backoff_s * (2 ** attempt)
                log.warning("llm %s %s: %s; retry %d/%d in %.2fs", role, step, faults[-1], attempt + 1,
                            retries, delay)
                time.sleep(min(delay, MAX_BACKOFF_S))
                continue
            except openai.APIStatusError as exc:
                if exc.status_code >= 500:  # some 5xx map to the base class
                    faults.append(_reason(exc))
                    if attempt < retries:
                        time.sleep(min(self.settings.backoff_s * (2 ** attempt), MAX_BACKOFF_S))
                        continue
                raise LLMError(f"llm: {role} ({step}): {_reason(exc)}") from exc
            latency = time.monotonic() - start
            text = ""
            if getattr(completion, "choices", None):
                text = completion.choices[0].message.content or ""
            usage = Usage()
            if getattr(completion, "usage", None) is not None:
                u = completion.usage
                usage = Usage(prompt_tokens=u.prompt_tokens or 0, completion_tokens=u.completion_tokens or 0,
                              total_tokens=u.total_tokens or 0)
            model = getattr(completion, "model", None) or self.settings.model
            cost = cost_of(self.settings, self.settings.model, usage) or cost_of(self.settings, model, usage)
            return LLMResponse(text=text, usage=usage, cost_usd=cost, latency_s=round(latency, 4),
                               request_id=getattr(completion, "id", None), attempts=attempt + 1,
                               provider=self.provider, faults=faults)
        raise AssertionError("unreachable")  # pragma: no cover

    # JSON answers ----------------------------------------------------------------------------
    def complete_json(self, role: str, prompt: str, schema: dict[str, Any], *, step: str | None = None,
                      system: str | None = None, round_: int | None = None) -> dict[str, Any]:
        """Ask for a JSON object matching ``schema``; one re-ask with the reason when it does not."""
        if step is None:
            self._auto_step += 1
            step = f"json.{role}.{self._auto_step}"
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}]
        value, reason = self.ask_json(role, messages, schema, steps=(step, f"{step}.retry"), round_=round_)
        if value is None:
            raise LLMError(f"llm: {role} ({step}): no valid JSON after a retry: {reason}")
        return value

    def ask_json(self, role: str, messages: list[dict[str, str]], schema: dict[str, Any], *,
                 steps: tuple[str, ...], round_: int | None = None,
                 expects: dict[str, Any] | None = None) -> tuple[dict[str, Any] | None, str]:
        """The one JSON re-ask loop: ask under ``steps[0]``; while the answer is not one object valid under
        ``schema``, ask again under the next step with the reason and the schema. (value, "") or
        (None, the last reason)."""
        expects = expects or {"kind": "json", "schema": schema, "how": "one JSON object matching the schema"}
        reason = ""
        for step in steps:
            text = self.chat(role, messages, step=step, round_=round_, expects=expects).text
            value, reason = parse_json_answer(text, schema)
            if value is not None:
                return value, ""
            messages = messages + [{"role": "assistant", "content": text}, {"role": "user", "content": (
                f"That answer was not usable: {reason}. Reply with one JSON object only, matching "
                f"this JSON schema:\n{json.dumps(schema)}")}]
        return None, reason


# The exchange provider: a person or another agent answers through files -------------------------
def prompt_markdown(role: str, step: str, messages: list[dict[str, str]], expects: dict[str, Any] | None,
                    answer_command: str, resume_command: str = "kernelskill runs resume RUN_ID") -> str:
    """A request as a person reads it: what to answer, in which shape, then the conversation."""
    expects = expects or {}
    lines = [f"# kernelskill asks the {role} (step `{step}`)", "",
             f"Answer with {expects.get('how', 'plain text')}.", ""]
    if expects.get("kind") == "json":
        lines += ["Schema of the answer:", "", "```json", json.dumps(expects.get("schema", {}), indent=2), "```", ""]
    if expects.get("method_in"):
        lines += ["Permitted methods: " + ", ".join(f"`{m}`" for m in expects["method_in"]), ""]
    lines += [f"Store the answer with `{answer_command}` (`-` reads stdin; add `--home H` when the run is not "
              f"under the default home), then `{resume_command}`. It is checked like an API answer and "
              "refused with the reason when it does not fit.", ""]
    for message in messages:
        lines += [f"## {message['role']}", "", str(message.get("content", "")).rstrip(), ""]
    return "\n".join(lines)


def exchange_provider(client: LLMClient, role: str, messages: list[dict[str, str]], step: str) -> LLMResponse:
    """Post the request into the run's ``exchange/`` folder and pause the run until it is answered
    (an answer already there is served by :meth:`LLMClient.chat` before any provider is asked)."""
    exchange = client._exchange()
    if exchange is None:
        raise KernelskillError("llm.provider exchange: the client has no run folder to post requests into")
    run_id = exchange.run_dir.name
    command = f"kernelskill runs answer {run_id} {step} ANSWER_FILE"
    expects = client.pending_expects or {}
    scrub = client.log.scrub if client.log is not None else (lambda v: v)
    request = Request(id=step, kind="llm", role=role, expects=expects,
                      payload=scrub({"round": client.pending_round, "messages": messages}))
    exchange.post(request, prompt=scrub(prompt_markdown(role, step, messages, expects, command,
                                                        f"kernelskill runs resume {run_id}")))
    raise Paused(step, "llm", {"type": "llm", "step": step, "role": role,
                               "prompt": f"exchange/{step}.prompt.md", "request": f"exchange/{step}.request.json",
                               "expects": expects.get("kind", "text")})


PROVIDERS["exchange"] = exchange_provider


# Helpers ---------------------------------------------------------------------------------------
def _response_from_event(event: dict[str, Any], *, from_log: bool) -> LLMResponse:
    data = event["data"]
    return LLMResponse(text=data.get("text", ""), usage=Usage(**data.get("usage", {})),
                       cost_usd=data.get("cost_usd", 0.0), latency_s=data.get("latency_s", 0.0),
                       request_id=data.get("request_id"), attempts=data.get("attempts", 1),
                       provider=data.get("provider", "openai"), answered_by=data.get("answered_by"),
                       from_log=from_log)


def _reason(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    text = str(exc).splitlines()[0][:200] if str(exc) else name
    return f"{status} {name}" if status else f"{name}: {text}"


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


