"""A SQLite copy of the KB rows a query reads, one file per KB version, so that a cold query never opens
DuckDB while the KB is current.

Importing ``duckdb``, the store and the linter it imports, then connecting, costs more than everything a
query then reads: the decision tables (fields, predicates, tiers, bottlenecks, vetoes), the cases of a
bottleneck / tier / structure, the methods of a case, their example folders, the counts, and the text
of the docs a search found. An ingest (``kb init``, ``kb import``, ``kb doctor --repair``, ...) therefore
copies those rows, read from the DuckDB version it just wrote, to ``<kb>/reads/<content hash>.sqlite``
(written under a temporary name, then renamed; the copies of other versions are deleted).

The copy keeps each object's JSON as DuckDB holds it (a reader validates it with the same pydantic model
the store uses), the columns ``cases_for`` filters on, the tables' full-read orders, the store's
``counts()`` and each doc's hit metadata (what Chroma holds for it). :class:`ReadCopy` answers the store's
reads from it with the store's semantics (``tests/test_query_speed_paths.py`` compares every read with the
store's); it is opened read-only and immutable (a version's file is never written again).

Importing this module imports neither DuckDB nor numpy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelskill.kb.schema import Bottleneck, Case, Field, Method, Predicate, Tier, Veto
from kernelskill.kb.version_files import writing

log = logging.getLogger(__name__)

COPY_DIR = "reads"
FORMAT = "1"
#: the full-table reads of the store and their order (as ``KBStore`` reads them)
LISTS: dict[str, tuple[type, str]] = {"fields": (Field, "id"), "predicates": (Predicate, "id"),
                                      "tiers": (Tier, "ord, id"), "bottlenecks": (Bottleneck, "priority, id"),
                                      "vetoes": (Veto, "id"), "methods": (Method, "id")}
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE lists (name TEXT NOT NULL, pos INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (name, pos))",
    "CREATE TABLE cases (id TEXT PRIMARY KEY, bottleneck TEXT, fallback INTEGER NOT NULL, tiers TEXT NOT NULL, "
    "structures TEXT NOT NULL, priority INTEGER NOT NULL, json TEXT NOT NULL)",
    "CREATE INDEX cases_by_bottleneck ON cases (fallback, bottleneck)",
    "CREATE TABLE methods (id TEXT PRIMARY KEY, json TEXT NOT NULL, example_root TEXT)",
    "CREATE TABLE docs (id TEXT PRIMARY KEY, method TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL, "
    "metadata TEXT NOT NULL)",
)


def copy_path(kb_dir: Path, content_hash: str) -> Path:
    return Path(kb_dir) / COPY_DIR / f"{content_hash}.sqlite"


@dataclass
class DocRow:
    """A search hit as :meth:`kernelskill.kb.store.KBStore.search_docs` gives it (same fields)."""

    id: str
    method: str
    title: str
    text: str
    distance: float
    metadata: dict[str, Any]


def write_read_copy(kb_dir: Path, content_hash: str, con: Any, counts: dict[str, int],
                    metadata: Callable[..., dict[str, Any]]) -> Path:
    """Copy the rows a query reads from the DuckDB connection ``con`` (the version of ``content_hash``)
    to its read copy, atomically, and delete the copies of other versions. ``counts`` is the store's
    ``counts()``; ``metadata(method, kind, title, doc_hash, generated, bottlenecks, tiers, structures)``
    gives a doc's hit metadata."""
    folder = Path(kb_dir) / COPY_DIR
    folder.mkdir(parents=True, exist_ok=True)
    final = copy_path(kb_dir, content_hash)
    with writing(final) as tmp:
        with contextlib.closing(sqlite3.connect(str(tmp))) as db:
            for sql in _SCHEMA:
                db.execute(sql)
            db.executemany("INSERT INTO meta VALUES (?, ?)",
                           [("format", FORMAT), ("content_hash", content_hash), ("counts", json.dumps(counts))])
            for name, (_, order) in LISTS.items():
                rows = con.execute(f"SELECT json FROM {name} ORDER BY {order}").fetchall()
                db.executemany("INSERT INTO lists VALUES (?, ?, ?)", [(name, i, r[0]) for i, r in enumerate(rows)])
            db.executemany("INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?)", [
                (i, b, int(bool(fb)), json.dumps(list(t or [])), json.dumps([int(s) for s in st or []]), p, j)
                for i, b, fb, t, st, p, j in con.execute(
                    "SELECT id, bottleneck, fallback, tiers, structures, priority, json FROM cases").fetchall()])
            db.executemany("INSERT INTO methods VALUES (?, ?, ?)",
                           con.execute("SELECT id, json, example_root FROM methods").fetchall())
            db.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?)", [
                (r[0], r[1], r[2], r[3], json.dumps(metadata(r[1], r[4], r[2], r[5], r[6], r[7] or [], r[8] or [],
                                                             r[9] or [])))
                for r in con.execute("SELECT id, method, title, text, kind, doc_hash, generated, bottlenecks, "
                                     "tiers, structures FROM docs").fetchall()])
            db.commit()
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
    return final


class ReadCopy:
    """One KB version's read copy (read-only); its reads answer as the store's do."""

    def __init__(self, db: sqlite3.Connection, content_hash: str) -> None:
        self._db = db
        self.content_hash = content_hash
        self._counts: dict[str, int] | None = None
        self._lock = threading.Lock()  # one connection, shared by a server's threads

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    @classmethod
    def open(cls, kb_dir: Path, content_hash: str) -> ReadCopy | None:
        """The copy of ``content_hash``, or None (absent, another format, unreadable)."""
        path = copy_path(kb_dir, content_hash)
        if not path.is_file():
            return None
        try:  # immutable: a version's copy is never written again (a rewrite is a new file renamed over it)
            db = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True, check_same_thread=False)
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        except (sqlite3.Error, ValueError) as exc:
            log.warning("KB read copy %s unreadable (%s); reading DuckDB", path, exc)
            return None
        if meta.get("format") != FORMAT or meta.get("content_hash") != content_hash:
            db.close()
            return None
        copy = cls(db, content_hash)
        copy._counts = json.loads(meta["counts"])
        return copy

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()

    def _list(self, name: str) -> list[Any]:
        model = LISTS[name][0]
        rows = self._rows("SELECT json FROM lists WHERE name = ? ORDER BY pos", (name,))
        return [model.model_validate_json(r[0]) for r in rows]

    def fields(self) -> list[Field]:
        return self._list("fields")

    def predicates(self) -> list[Predicate]:
        return self._list("predicates")

    def tiers(self) -> list[Tier]:
        return self._list("tiers")

    def bottlenecks(self) -> list[Bottleneck]:
        return self._list("bottlenecks")

    def vetoes(self) -> list[Veto]:
        return self._list("vetoes")

    def counts(self) -> dict[str, int]:
        return dict(self._counts or {})

    def cases_for(self, bottleneck: str | None, tier: str | None, structure: int | None, *,
                  fallback: bool = False) -> list[Case]:
        """As the store's: the cases of ``bottleneck`` (with ``fallback``, the fallback cases of it or of
        none), whose tiers / structures are empty or hold ``tier`` / ``structure`` (``None`` matches only an
        empty list), by priority, then id."""
        if fallback:
            rows = self._rows("SELECT id, tiers, structures, priority, json FROM cases WHERE fallback = 1 "
                              "AND (bottleneck IS NULL OR bottleneck = ?)", (bottleneck,))
        elif bottleneck is None:
            rows = []
        else:
            rows = self._rows("SELECT id, tiers, structures, priority, json FROM cases WHERE fallback = 0 "
                              "AND bottleneck = ?", (bottleneck,))
        kept = []
        for cid, tiers, structures, priority, raw in rows:
            t, s = json.loads(tiers), json.loads(structures)
            if (not t or (tier is not None and tier in t)) and (not s or (structure is not None and structure in s)):
                kept.append((priority, cid, raw))
        kept.sort()
        return [Case.model_validate_json(raw) for _, _, raw in kept]

    def methods(self, ids: Sequence[str] | None = None) -> list[Method]:
        if ids is None:
            return self._list("methods")
        if not ids:
            return []
        wanted = list(dict.fromkeys(ids))
        marks = ",".join("?" * len(wanted))
        found = dict(self._rows(f"SELECT id, json FROM methods WHERE id IN ({marks})", wanted))
        return [Method.model_validate_json(found[i]) for i in ids if i in found]

    def example_root(self, method_id: str) -> Path | None:
        rows = self._rows("SELECT example_root FROM methods WHERE id = ?", (method_id,))
        return Path(rows[0][0]) if rows and rows[0][0] else None

    def hits(self, found: Sequence[tuple[str, float]]) -> list[DocRow]:
        """Search hits for ``(id, distance)`` pairs, in their order; an id the copy lacks is dropped (the
        store drops what DuckDB lacks)."""
        if not found:
            return []
        ids = list(dict.fromkeys(i for i, _ in found))
        marks = ",".join("?" * len(ids))
        rows = {r[0]: r for r in self._rows(f"SELECT id, method, title, text, metadata FROM docs WHERE id IN ({marks})",
                                            ids)}
        out = []
        for i, dist in found:
            row = rows.get(i)
            if row is not None:
                out.append(DocRow(id=i, method=row[1], title=row[2], text=row[3], distance=float(dist),
                                  metadata=json.loads(row[4])))
        return out
