"""LLM requests of many runs at once: bounded, slowed down when the endpoint says it is overloaded.

Each run keeps its own :class:`~kernelskill.pipeline.loop.llm.LLMClient` (its retries, backoff, retry-after
and accounting are reused unchanged); :class:`GatedLLMClient` only wraps the request itself:

- at most ``limit`` requests are in flight over the whole suite (:class:`LLMGate`);
- a request that met a rate limit (HTTP 429) halves the limit (never below 1) and every new request
  waits out the server's ``retry-after`` (or the client's backoff); ``raise_after`` clean answers in a
  row raise it again by one, up to the configured limit (additive increase, multiplicative decrease);
- with a deadline, a request that would not be answered before it (judged by the slowest answer so far)
  is not sent: the run pauses before that step (:class:`~kernelskill.pipeline.runs.Paused`) and the
  next session asks it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kernelskill.pipeline.loop.llm import LLMClient, LLMError, LLMResponse
from kernelskill.pipeline.runs import Paused

log = logging.getLogger(__name__)


class LLMGate:
    def __init__(self, limit: int = 8, *, raise_after: int = 4, deadline: float | None = None,
                 cooldown_s: float = 1.0) -> None:
        self.max_limit = max(1, limit)
        self.limit = self.max_limit
        self.raise_after = max(1, raise_after)
        self.deadline = deadline  # time.monotonic() value
        self.cooldown_s = cooldown_s
        self.in_flight = 0
        self.requests = 0
        self.rate_limited = 0
        self.slowest_s = 0.0
        self._clean = 0
        self._resume_at = 0.0
        self._cond = threading.Condition()

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def would_overrun(self) -> bool:
        left = self.time_left()
        return left is not None and left < self.slowest_s

    def acquire(self) -> None:
        with self._cond:
            while True:
                wait = self._resume_at - time.monotonic()
                if self.in_flight < self.limit and wait <= 0:
                    self.in_flight += 1
                    self.requests += 1
                    return
                self._cond.wait(timeout=max(wait, 0.05) if wait > 0 else None)

    def release(self, *, latency_s: float, rate_limited: bool, retry_after_s: float | None = None) -> None:
        with self._cond:
            self.in_flight -= 1
            self.slowest_s = max(self.slowest_s, latency_s)
            if rate_limited:
                self.rate_limited += 1
                self._clean = 0
                old, self.limit = self.limit, max(1, self.limit // 2)
                pause = retry_after_s if retry_after_s is not None else self.cooldown_s
                self._resume_at = max(self._resume_at, time.monotonic() + pause)
                if old != self.limit:
                    log.warning("llm: rate limited; %d requests at a time now (was %d)", self.limit, old)
            else:
                self._clean += 1
                if self._clean >= self.raise_after and self.limit < self.max_limit:
                    self.limit += 1
                    self._clean = 0
            self._cond.notify_all()


def _rate_limited(faults: list[str]) -> bool:
    return any(f.startswith("429") or "RateLimit" in f for f in faults)


class GatedLLMClient(LLMClient):
    """An :class:`LLMClient` whose requests to the endpoint pass through a shared :class:`LLMGate`.
    Answers from the run's log, its exchange folder or a replay never wait for the gate."""

    def __init__(self, settings: Any, gate: LLMGate, **kw: Any) -> None:
        super().__init__(settings, **kw)
        self.gate = gate

    def _request(self, role: str, messages: list[dict[str, str]], step: str, **kw: Any) -> LLMResponse:
        if self.gate.would_overrun():
            raise Paused(step, "llm", None)
        self.gate.acquire()
        start = time.monotonic()
        try:
            response = super()._request(role, messages, step, **kw)
        except LLMError as exc:
            self.gate.release(latency_s=time.monotonic() - start, rate_limited="429" in str(exc))
            raise
        except BaseException:
            self.gate.release(latency_s=time.monotonic() - start, rate_limited=False)
            raise
        self.gate.release(latency_s=response.latency_s, rate_limited=_rate_limited(response.faults))
        return response
