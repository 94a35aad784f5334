"""Keep secrets out of everything a run writes or sends: events, prompts, exchange files, candidates, reports.

Two nets, applied to every string:

* known values: the value of every environment variable whose name says it is a secret (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSW*``, ``*CREDENTIAL*``, ``*AUTH*``...), plus the values registered by the
  code that reads settings (:func:`register_settings`): every key-like setting (``llm.api_key``, the variable
  ``llm.api_key_env`` names), the key-like values of the settings files (``<home>/kernelskill.toml``,
  ``./kernelskill.toml``) and every value of a ``.env`` file beside them. Each known value is also found in
  its encoded forms: base64 (standard and URL-safe alphabets, at any alignment inside a longer encoded text,
  across the line breaks of wrapped base64), hex (either case) and URL percent-encoding;
* shapes: private-key blocks (``-----BEGIN ... PRIVATE KEY-----``), OpenAI/Anthropic-style ``sk-...``
  keys, GitHub, Hugging Face, Slack and AWS access-key ids, ``Bearer`` tokens, and credentials written into
  URLs (``scheme://user:password@host``, ``?api_key=...``), of which only the secret part is replaced.

One redactor for the whole package: the run store (events, candidates, outputs), the prompts, the exchange
files and the MCP server all use this module. :func:`current` is the redactor of the secrets known now, built
once and rebuilt only when a secret is registered or the environment's secrets change.

A match becomes ``[redacted]``. Values shorter than :data:`MIN_SECRET_CHARS` are not treated as secrets
(they would blank out ordinary words). Standard library only.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import stat
import threading
import tomllib
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 6
#: an encoded form shorter than this is not looked for (a 6-character secret's inner base64 is 6-8 long)
MIN_ENCODED_CHARS = 6
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
#: variables whose name matches SECRET_NAME but whose value is a setting, not a secret
NOT_SECRET = {"KERNELSKILL_LLM_API_KEY_ENV", "SSH_AUTH_SOCK", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS",
              "XDG_SESSION_ID", "XDG_SESSION_DESKTOP", "DBUS_SESSION_BUS_ADDRESS"}
#: the settings files whose key-like values are secrets, and the files whose every value is
SETTINGS_FILE = "kernelskill.toml"
DOTENV_FILE = ".env"
#: a secret file is read up to this many bytes (a bound, not a parser: the rest is ignored)
MAX_SECRET_FILE_BYTES = 1 << 20

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

_URLSAFE = str.maketrans("+/", "-_")
_registered: set[str] = set()
_scanned: set[tuple[Path, Path]] = set()
_lock = threading.Lock()
_current: tuple[tuple[str, ...], Redactor] | None = None


def register(*values: str | None) -> None:
    """Treat these values as secrets from now on (e.g. an API key read from a config file)."""
    with _lock:
        _registered.update(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS)


def _is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) and name.upper() not in NOT_SECRET and not name.lower().endswith("_env")


def _read_bounded(path: Path) -> str | None:
    """The text of a regular file (never a FIFO or a device), at most :data:`MAX_SECRET_FILE_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, MAX_SECRET_FILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _key_like_values(table: Any, key: str = "") -> Iterator[str]:
    """The string values of a parsed TOML table under key-like names (``api_key``, ``token``...), nested."""
    if isinstance(table, dict):
        for k, v in table.items():
            yield from _key_like_values(v, str(k))
    elif isinstance(table, list):
        for v in table:
            yield from _key_like_values(v, key)
    elif isinstance(table, str) and key and _is_secret_name(key):
        yield table


def toml_secret_values(path: Path) -> list[str]:
    """The values of key-like settings in a ``kernelskill.toml`` (one that does not parse gives none: the
    settings loader reports it)."""
    text = _read_bounded(path)
    if not text:
        return []
    try:
        return list(_key_like_values(tomllib.loads(text)))
    except tomllib.TOMLDecodeError:
        return []


def dotenv_values(path: Path) -> list[str]:
    """Every value of a ``.env`` file (``NAME=value``, ``export NAME="value"``, ``# comments``)."""
    text = _read_bounded(path)
    out: list[str] = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        value = line.partition("=")[2].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].strip()
        out.append(value)
    return out


def secret_file_values(home: Path | None, cwd: Path | None = None) -> list[str]:
    """The secrets written in the files beside a run: key-like values of ``<home>/kernelskill.toml`` and
    ``./kernelskill.toml``, and every value of ``<home>/.env`` and ``./.env``."""
    folders = [p for p in (home, cwd if cwd is not None else Path.cwd()) if p is not None]
    values: list[str] = []
    for folder in folders:
        values += toml_secret_values(Path(folder) / SETTINGS_FILE)
        values += dotenv_values(Path(folder) / DOTENV_FILE)
    return values


def _setting_values(value: Any, key: str = "") -> Iterator[str]:
    """String values of key-like fields of a settings object (a pydantic model or a plain dict)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    yield from _key_like_values(value, key)


def register_settings(settings: Any, cwd: Path | None = None) -> None:
    """Register every secret the loaded settings know of: key-like settings (``llm.api_key``), the variable
    ``llm.api_key_env`` names, and the secret files beside them (:func:`secret_file_values`)."""
    llm = getattr(settings, "llm", None)
    values: list[str | None] = []
    if llm is not None:
        values += [getattr(llm, "api_key", None), os.environ.get(getattr(llm, "api_key_env", "") or "")]
    values += list(_setting_values(settings))
    home = getattr(settings, "home", None)
    values += secret_file_values(Path(home) if home is not None else None, cwd)
    register(*values)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every known secret value, longest first (so a value that contains another goes first)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _is_secret_name(k) and len(v) >= MIN_SECRET_CHARS}
    with _lock:
        values |= _registered
    return sorted(values, key=len, reverse=True)


def encoded_forms(value: str) -> tuple[set[str], set[str]]:
    """``(plain_forms, base64_forms)`` of a secret: hex (either case) and URL percent-encoding; base64 in the
    standard and URL-safe alphabets at each of the three byte alignments, cut to the characters that depend
    on the secret alone (so the secret is found inside the base64 of a longer text, e.g. a whole file)."""
    data = value.encode("utf-8")
    plain = {data.hex(), data.hex().upper(), urllib.parse.quote(value, safe="")}
    b64: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode("ascii")
        inner = encoded[-(-8 * shift // 6):(8 * (shift + len(data))) // 6]
        b64 |= {inner, inner.translate(_URLSAFE)}
    return ({f for f in plain if len(f) >= MIN_ENCODED_CHARS and f != value},
            {f for f in b64 if len(f) >= MIN_ENCODED_CHARS and f != value})


class Redactor:
    """Replace known secret values (and their encoded forms) and secret-shaped strings in strings, lists
    and dicts."""

    def __init__(self, values: Iterable[str] | None = None) -> None:
        self.values = sorted({v for v in (secret_values() if values is None else values)
                              if len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        literal: set[str] = set(self.values)
        wrapped: set[str] = set()
        for value in self.values:
            plain, b64 = encoded_forms(value)
            literal |= plain
            wrapped |= b64
        alternatives = [(len(f), re.escape(f)) for f in literal]
        # base64 is often wrapped (76 characters a line): a line break may fall anywhere inside the secret
        alternatives += [(len(f), r"(?:\r?\n)?".join(map(re.escape, f))) for f in wrapped]
        alternatives.sort(key=lambda pair: pair[0], reverse=True)
        self._known = re.compile("|".join(a for _, a in alternatives)) if alternatives else None

    def holds_known(self, text: str) -> bool:
        """Whether ``text`` holds a known secret value or one of its encoded forms (shapes aside)."""
        return bool(self._known and self._known.search(text))

    def text(self, text: str) -> str:
        if self._known is not None:
            text = self._known.sub(REDACTED, text)
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


def register_default_files() -> None:
    """Register the secret files a process finds without loaded settings (the GPU side, a library caller):
    ``$KERNELSKILL_HOME`` (else ``~/.kernelskill``) and the current folder, once per pair of folders."""
    try:
        home = Path(os.environ.get("KERNELSKILL_HOME") or "~/.kernelskill").expanduser()
        cwd = Path.cwd()
    except (OSError, RuntimeError):  # no current folder or no home: nothing to read there
        return
    with _lock:
        if (home, cwd) in _scanned:
            return
        _scanned.add((home, cwd))
    register(*secret_file_values(home, cwd))


def current() -> Redactor:
    """The redactor of every secret known now (environment, registered, the secret files of the default
    home and the current folder), built once per set of secrets."""
    global _current
    register_default_files()
    values = tuple(secret_values())
    cached = _current
    if cached is not None and cached[0] == values:
        return cached[1]
    redactor = Redactor(values)
    _current = (values, redactor)
    return redactor


def redact(value: Any) -> Any:
    """``value`` with every secret this process knows of replaced (a fresh look at the environment)."""
    return current().value(value)
