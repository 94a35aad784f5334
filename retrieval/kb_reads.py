"""The KB reads of a query kept on disk, so that a new process asking what was asked before does not open
DuckDB (importing ``duckdb``, the store and the linter, then connecting, is a third of a cold
``kernelskill query``).

:class:`DiskReadsKB` stands where a query's store stands. It answers the reads the rules engine and the
ranking make (``fields``, ``predicates``, ``tiers``, ``bottlenecks``, ``vetoes``, ``cases_for``,
``methods``, ``counts``, ``example_root``) from the ``reads`` table of ``<kb>/search_cache.sqlite`` when
the same read was answered before by the same DuckDB version, and otherwise asks the real store (opened
then, once) and keeps its answer (written in one transaction by :meth:`DiskReadsKB.flush`, which a query
calls at its end). Anything else (``search_docs``, ``stats``, ...) goes to the real store; the doc-search
answers have their own cache (:mod:`.search_cache`), which this object serves without the store (it knows
the KB folder, the content hash and the embedder).

A DuckDB version is a file that is never written again once ``CURRENT`` names it, so an answer keyed by
that file's name (and the content hash ``CURRENT`` gives with it) is the answer the store gives for it.
An answer is kept only when ``CURRENT`` named the same version before and after the store read it, and
rows of other versions are dropped when a new one is kept. Objects are kept as the JSON pydantic writes
for them and read back with ``model_validate_json``, as the store reads its own rows. The object is made
only for a KB that is current (:func:`kernelskill.kb.sources.kb_is_current`), so the first read here is
never one the store would have answered after building or rebuilding the KB.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelskill.kb.schema import Bottleneck, Case, Method, Predicate, Tier, Veto
from kernelskill.kb.schema import Field as KBField
from kernelskill.kb.sources import CURRENT

from .search_cache import CACHE_NAME, connect, write

log = logging.getLogger(__name__)

_READS_TABLE = ("CREATE TABLE IF NOT EXISTS reads (version TEXT NOT NULL, key TEXT NOT NULL, answer TEXT NOT NULL, "
                "PRIMARY KEY (version, key))")
_LISTS: dict[str, type] = {"fields": KBField, "predicates": Predicate, "tiers": Tier, "bottlenecks": Bottleneck,
                           "vetoes": Veto, "cases_for": Case, "methods": Method}


class DiskReadsKB:
    """A read-only KB store whose reads come from disk when answered before (see the module text)."""

    def __init__(self, settings: Any, open_store: Callable[[], Any]) -> None:
        self.settings = settings
        self.kb_dir = Path(settings.kb_dir)
        self._open_store = open_store
        self._store: Any = None
        self._embedder: Any = None
        self._db: sqlite3.Connection | None = None
        self._pending: list[tuple[str, str, str]] = []  # (version, key, answer) not written yet
        self._lock = threading.Lock()

    # -- the real store and the version ------------------------------------------------------------
    def store(self) -> Any:
        """The real store (opened on first need)."""
        with self._lock:
            if self._store is None:
                self._store = self._open_store()
            return self._store

    def _version(self) -> tuple[str, str] | None:
        """``(DuckDB file, content hash)`` that ``CURRENT`` names, or None (unreadable, older format)."""
        try:
            cur = json.loads((self.kb_dir / CURRENT).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(cur, dict) or not cur.get("db") or not cur.get("content_hash"):
            return None
        return str(cur["db"]), str(cur["content_hash"])

    def content_hash(self) -> str | None:
        version = self._version()
        return version[1] if version is not None else self.store().content_hash()

    @property
    def embedder(self) -> Any:
        """The store's embedder (the same shared instance ``KBStore.embedder`` gives), without the store."""
        if self._store is not None:
            return self._store.embedder
        if self._embedder is None:
            from kernelskill.kb.embed import Embedder

            self._embedder = Embedder.get(getattr(self.settings, "embed", None), cache_dir=self.kb_dir)
        return self._embedder

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.store(), name)

    # -- the disk table ----------------------------------------------------------------------------
    def _conn(self, *, create: bool = False) -> sqlite3.Connection | None:
        """The cache file (None when it is absent and not ``create``, or cannot be opened)."""
        if self._db is None:
            path = self.kb_dir / CACHE_NAME
            if not create and not path.is_file():
                return None
            try:
                self._db = connect(path, check_same_thread=False)
            except sqlite3.Error as exc:  # a KB folder this user cannot write: no cache, the store answers
                log.debug("KB read cache %s unusable: %s", path, exc)
                return None
        return self._db

    def _get(self, version: str, key: str) -> str | None:
        db = self._conn()
        if db is None:
            return None
        try:
            with self._lock:
                row = db.execute("SELECT answer FROM reads WHERE version = ? AND key = ?", (version, key)).fetchone()
        except sqlite3.Error as exc:  # also "no such table" in a file the search cache made: a miss
            log.debug("KB read cache unreadable: %s", exc)
            return None
        return row[0] if row is not None else None

    def flush(self) -> None:
        """Write the answers read from the store since the last flush, in one transaction (a query calls
        this once at its end), if ``CURRENT`` still names the version they were read from."""
        with self._lock:
            pending, self._pending = self._pending, []
        version = self._version()
        rows = [row for row in pending if version is not None and row[0] == json.dumps(list(version))]
        db = self._conn(create=True) if rows else None
        if db is None:
            return
        try:
            with self._lock:
                write(db, _READS_TABLE, [("DELETE FROM reads WHERE version != ?", [(rows[0][0],)]),
                                         ("INSERT OR REPLACE INTO reads (version, key, answer) VALUES (?, ?, ?)", rows)])
        except sqlite3.Error as exc:  # read-only folder, locked by a writer: answered, just not kept
            log.debug("KB read cache not written: %s", exc)

    def _read(self, name: str, args: list[Any], call: Callable[[Any], Any], dump: Callable[[Any], str],
              load: Callable[[str], Any]) -> Any:
        version = self._version()
        if version is None:
            return call(self.store())
        tag = json.dumps(list(version))
        key = json.dumps([name, *args])
        raw = self._get(tag, key)
        if raw is not None:
            return load(raw)
        answer = call(self.store())
        if self._version() == version:  # not switched while the store read it
            with self._lock:
                self._pending.append((tag, key, dump(answer)))
        return answer

    def _objects(self, name: str, args: list[Any], call: Callable[[Any], list[Any]]) -> list[Any]:
        model = _LISTS[name]
        return self._read(name, args, call, lambda objs: json.dumps([o.model_dump_json() for o in objs]),
                          lambda raw: [model.model_validate_json(s) for s in json.loads(raw)])

    # -- the reads a query makes ---------------------------------------------------------------------
    def fields(self) -> list[Any]:
        return self._objects("fields", [], lambda s: s.fields())

    def predicates(self) -> list[Any]:
        return self._objects("predicates", [], lambda s: s.predicates())

    def tiers(self) -> list[Any]:
        return self._objects("tiers", [], lambda s: s.tiers())

    def bottlenecks(self) -> list[Any]:
        return self._objects("bottlenecks", [], lambda s: s.bottlenecks())

    def vetoes(self) -> list[Any]:
        return self._objects("vetoes", [], lambda s: s.vetoes())

    def cases_for(self, bottleneck: str | None, tier: str | None, structure: int | None, *,
                  fallback: bool = False) -> list[Any]:
        return self._objects("cases_for", [bottleneck, tier, structure, fallback],
                             lambda s: s.cases_for(bottleneck, tier, structure, fallback=fallback))

    def methods(self, ids: list[str] | None = None) -> list[Any]:
        return self._objects("methods", [list(ids) if ids is not None else None], lambda s: s.methods(ids))

    def counts(self) -> dict[str, int]:
        return self._read("counts", [], lambda s: s.counts(), json.dumps, json.loads)

    def example_root(self, method_id: str) -> Path | None:
        return self._read("example_root", [method_id], lambda s: s.example_root(method_id),
                          lambda p: json.dumps(str(p) if p is not None else None),
                          lambda raw: Path(v) if (v := json.loads(raw)) is not None else None)

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        if self._store is not None:
            self._store.close()
