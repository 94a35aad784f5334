"""Keep secrets out of what the MCP server sends: API keys and credentials written into URLs.

Every tool result and every error message goes through :func:`Redactor.clean` before it leaves the server.
"""

from __future__ import annotations

import os
import re
from typing import Any

#: ``scheme://user:password@host`` -> ``scheme://***@host``
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@]+:[^/\s@]*@")
#: ``?api_key=...`` / ``&token=...`` in a URL's query
_URL_QUERY_SECRET = re.compile(r"(?i)(?P<key>[?&](?:api[_-]?key|key|token|access_token|secret|password)=)[^&\s\"']+")
#: environment variables whose value is a secret by name
_SECRET_NAME = re.compile(r"(?i)(api[_-]?key|token|secret|password|passwd|credential)")
MASK = "***"
MIN_SECRET_LEN = 6  # shorter values are too likely to occur by chance in ordinary text


def secret_values(settings: Any = None, environ: dict[str, str] | None = None) -> list[str]:
    """The configured API key and every secret-named environment variable's value, longest first."""
    env = os.environ if environ is None else environ
    found: set[str] = set()
    if settings is not None:
        llm = getattr(settings, "llm", None)
        if llm is not None:
            for value in (llm.api_key, env.get(llm.api_key_env)):
                if value:
                    found.add(value)
    for name, value in env.items():
        if value and _SECRET_NAME.search(name):
            found.add(value)
    return sorted((v for v in found if len(v) >= MIN_SECRET_LEN), key=len, reverse=True)


class Redactor:
    """Replaces known secret values and URL credentials in strings, dicts and lists."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets = secrets

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, MASK)
        value = _URL_CREDENTIALS.sub(lambda m: m.group("scheme") + MASK + "@", value)
        return _URL_QUERY_SECRET.sub(lambda m: m.group("key") + MASK, value)

    def clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.clean(v) for v in value]
        return value
