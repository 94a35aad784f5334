"""Keep secrets out of everything a run writes or sends: events, prompts, exchange files, reports.

Two nets, applied to every string:

* known values: the value of every environment variable whose name says it is a secret (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSW*``, ``*CREDENTIAL*``, ``*AUTH*``...), plus values registered by the
  code that reads them from elsewhere (the API key of ``kernelskill.toml``, see :func:`register`);
* shapes: private-key blocks (``-----BEGIN ... PRIVATE KEY-----``), OpenAI/Anthropic-style ``sk-...``
  keys, GitHub, Hugging Face, Slack and AWS access-key ids, ``Bearer`` tokens, and credentials written into
  URLs (``scheme://user:password@host``, ``?api_key=...``), of which only the secret part is replaced.

One redactor for the whole package: the run store, the prompts and the MCP server all use this module.

A match becomes ``[redacted]``. Values shorter than :data:`MIN_SECRET_CHARS` are not treated as secrets
(they would blank out ordinary words). Standard library only.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 6
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
#: variables whose name matches SECRET_NAME but whose value is a setting, not a secret
NOT_SECRET = {"KERNELSKILL_LLM_API_KEY_ENV", "SSH_AUTH_SOCK", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS",
              "XDG_SESSION_ID", "XDG_SESSION_DESKTOP", "DBUS_SESSION_BUS_ADDRESS"}

PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
    re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{15,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/\-]{16,}=*"),
)

#: ``scheme://user:password@host`` -> ``scheme://[redacted]@host``
URL_CREDENTIALS = re.compile(r"(?P<keep>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@]+:[^/\s@]*@")
#: ``?api_key=...`` / ``&token=...`` in a URL's query
URL_QUERY_SECRET = re.compile(r"(?i)(?P<keep>[?&](?:api[_-]?key|key|token|access_token|secret|password)=)[^&\s\"']+")

_registered: set[str] = set()
_lock = threading.Lock()


def register(*values: str | None) -> None:
    """Treat these values as secrets from now on (e.g. an API key read from a config file)."""
    with _lock:
        _registered.update(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS)


def register_settings(settings: Any) -> None:
    """Register the LLM API key of loaded settings (``kernelskill.toml`` or the variable it names)."""
    llm = getattr(settings, "llm", None)
    if llm is not None:
        register(getattr(llm, "api_key", None), os.environ.get(getattr(llm, "api_key_env", "") or ""))


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every known secret value, longest first (so a value that contains another goes first)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items()
              if SECRET_NAME.search(k) and k not in NOT_SECRET and len(v) >= MIN_SECRET_CHARS}
    with _lock:
        values |= _registered
    return sorted(values, key=len, reverse=True)


class Redactor:
    """Replace known secret values and secret-shaped strings in strings, lists and dicts."""

    def __init__(self, values: Iterable[str] | None = None) -> None:
        self.values = sorted({v for v in (secret_values() if values is None else values)
                              if len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        for pattern in PATTERNS:
            text = pattern.sub(REDACTED, text)
        text = URL_CREDENTIALS.sub(lambda m: m.group("keep") + REDACTED + "@", text)
        return URL_QUERY_SECRET.sub(lambda m: m.group("keep") + REDACTED, text)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


def redact(value: Any) -> Any:
    """``value`` with every secret this process knows of replaced (a fresh look at the environment)."""
    return Redactor().value(value)
