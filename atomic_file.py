"""Whole-file writes a reader never sees half of: a temporary file beside the target, flushed and fsync'd,
then renamed over it. Standard library only, with no kernelskill import: both the harness (torch and the
standard library on a bare GPU box) and the runs' exchange use it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` (its folder made if missing). The file is private to its owner (0600, as
    ``mkstemp`` makes it) unless ``mode`` says otherwise; a failed write leaves the old file and no temporary."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
