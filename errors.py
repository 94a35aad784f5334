"""The one exception type the CLI turns into a one-line error and a non-zero exit, and the one escaping
helper every message shown to a user goes through (errors, lint findings, listings)."""

from __future__ import annotations

import unicodedata

#: characters shown escaped although they are not ``Cc``: they reorder or hide text on a terminal
_INVISIBLE = frozenset("\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff")


def printable(text: object) -> str:
    """``text`` with every control character (C0, DEL, C1: newlines, escapes, OSC/CSI introducers) and every
    bidirectional or invisible format character written as a Python escape (``\\x1b``, ``\\n``, ``\\u202e``):
    a message stays one line and cannot move the cursor, retitle the terminal or forge another line.
    Idempotent (an escaped text has no control character left)."""
    text = str(text)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch == " " or (ch not in _INVISIBLE and unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp")):
            out.append(ch)
        else:
            code = ord(ch)
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or
                       (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"))
    return "".join(out)


class KernelskillError(Exception):
    """A user-facing error: the message names the file, line or field at fault. Its text is always one
    printable line (see :func:`printable`), whatever file names, ids or values it quotes."""

    exit_code = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return printable(super().__str__())
