"""The one exception type the CLI turns into a one-line error and a non-zero exit."""

from __future__ import annotations


class KernelskillError(Exception):
    """A user-facing error: the message names the file, line or field at fault."""

    exit_code = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
