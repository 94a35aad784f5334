"""Files kept per KB version beside the store (the doc vectors' mirror, the read copy): each is written under
a temporary name, moved into place in one rename, and then the files of other versions in its folder go.
Standard library only."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def writing(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final`` to write (and fsync) the new version into. On a clean exit it
    replaces ``final`` and the other versions in the folder are deleted (hidden files, such as another
    writer's temporary one, stay); on an error the temporary file is removed and nothing else changes."""
    tmp = final.parent / f".{final.name}.{uuid.uuid4().hex}.tmp"
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    for old in final.parent.iterdir():
        if old != final and not old.name.startswith("."):
            with contextlib.suppress(OSError):
                old.unlink()
