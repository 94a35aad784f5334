"""Doc-search answers kept on disk, so that a new process asking a question already answered does not
start Chroma (importing ``chromadb`` and opening its client is most of a cold ``kernelskill query``).

An answer is keyed by ``sha256`` of the KB's content hash, the embedding model's fingerprint, the query
text, the wanted methods and ``k``, and it is stored only when the index that answered matched that
content hash (the numpy mirror of the doc vectors always does; Chroma when ``kb stats`` says it is in
sync: an index left behind by an interrupted ingest is never cached). So it is the answer the index
gives for exactly this question on exactly this index; anything that could change the answer
changes the key. The file is ``<kb>/search_cache.sqlite`` (stdlib sqlite, cheap to open); a KB folder
that cannot be written is simply not cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

log = logging.getLogger(__name__)

CACHE_NAME = "search_cache.sqlite"
FIELDS = ("id", "method", "title", "text", "distance", "metadata")


def _model_key(kb: Any) -> str | None:
    try:
        return str(kb.embedder.model_key)
    except Exception:  # noqa: BLE001 - a reader without an embedder is never cached
        return None


def _in_sync(kb: Any) -> bool:
    """Did the answer come from an index that matches the KB's content hash? The numpy mirror of the doc
    vectors always does (it is written and read for one content hash); Chroma when its recorded hash is
    the KB's (asking opens Chroma, so the mirror is checked first)."""
    try:
        mirror = getattr(kb, "doc_vectors", None)
        if mirror is not None and mirror() is not None:
            return True
        return bool(kb.stats()["chroma"]["in_sync"])
    except Exception:  # noqa: BLE001 - unknown: do not cache
        return False


def cache_key(kb: Any, text: str, wanted: Sequence[str], k: int) -> tuple[Path, str] | None:
    """``(cache file, key)`` for a KB store with a folder and a content hash, else None (not cached)."""
    kb_dir = getattr(kb, "kb_dir", None)
    if kb_dir is None:
        return None
    try:
        content = kb.content_hash()
    except Exception:  # noqa: BLE001 - a reader without a hash is never cached
        return None
    model = _model_key(kb)
    if not content or not model:
        return None
    raw = json.dumps([content, model, text, list(wanted), k])
    return Path(kb_dir) / CACHE_NAME, hashlib.sha256(raw.encode()).hexdigest()


ANSWERS_TABLE = "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, hits TEXT NOT NULL)"


def connect(path: Path, **kwargs: Any) -> sqlite3.Connection:
    """The cache file in autocommit mode: reads need no transaction, and :func:`write` makes one."""
    return sqlite3.connect(str(path), timeout=5, isolation_level=None, **kwargs)


def write(db: sqlite3.Connection, table: str, statements: Sequence[tuple[str, Any]]) -> None:
    """Create ``table`` when missing and run ``statements`` (``(sql, rows)``, run with ``executemany``) in
    one transaction: one commit, so one round of syncs to disk, for a cache file that may be new."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(table)
        for sql, rows in statements:
            db.executemany(sql, rows)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _hit(row: dict[str, Any]) -> Any:
    return SimpleNamespace(**{f: row.get(f) for f in FIELDS})


def cached_search(kb: Any, text: str, wanted: Sequence[str], k: int,
                  search: Callable[[], list[Any]]) -> list[Any]:
    """``search()``'s answer for this question, from the disk cache when it is there."""
    where = cache_key(kb, text, wanted, k)
    if where is None:
        return search()
    path, key = where
    try:
        if path.is_file():  # (a file without the table yet: "no such table", a miss)
            with contextlib.closing(connect(path)) as db:
                row = db.execute("SELECT hits FROM answers WHERE key = ?", (key,)).fetchone()
            if row is not None:
                return [_hit(h) for h in json.loads(row[0])]
    except sqlite3.Error as exc:
        log.debug("search cache %s unreadable: %s", path, exc)
    hits = search()
    if not _in_sync(kb):
        return hits
    rows = [{f: getattr(h, f, None) for f in FIELDS} for h in hits]
    try:
        with contextlib.closing(connect(path)) as db:
            write(db, ANSWERS_TABLE, [("INSERT OR REPLACE INTO answers (key, hits) VALUES (?, ?)",
                                       [(key, json.dumps(rows))])])
    except (sqlite3.Error, OSError) as exc:  # a KB the user cannot write: answered, just not cached
        log.debug("search cache %s not written: %s", path, exc)
    return hits
