"""The KB reads of a query answered without DuckDB (importing ``duckdb``, the store and the linter, then
connecting, is a third of a cold ``kernelskill query``).

:class:`DiskReadsKB` stands where a query's store stands. It answers the reads the rules engine and the
ranking make (``fields``, ``predicates``, ``tiers``, ``bottlenecks``, ``vetoes``, ``cases_for``,
``methods``, ``counts``, ``example_root``) and the doc search (``search_docs``, ``doc_vectors``):

- from the read copy of the current version (:mod:`kernelskill.kb.read_copy`, written by every ingest)
  when it has one: every read, first-seen or not, and the hits' text of the exact search over the doc
  vectors' mirror;
- otherwise (a KB written before the copy existed, a copy that failed to write) from the ``reads`` table
  of ``<kb>/search_cache.sqlite`` when the same read was answered before by the same DuckDB version, else
  from the real store (opened then, once), keeping its answer (written in one transaction by
  :meth:`DiskReadsKB.flush`, which a query calls at its end).

Anything else (``stats``, ...) goes to the real store; the doc-search answers have their own cache
(:mod:`.search_cache`), which this object serves without the store (it knows the KB folder, the content
hash and the embedder).

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

from kernelskill.kb.doc_vectors import DEFAULT_MAX_DOCS, DocVectors, query_vector
from kernelskill.kb.read_copy import ReadCopy
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
        self._copy: tuple[str, ReadCopy | None] | None = None  # (content hash, its read copy or None)
        self._vectors: DocVectors | None = None
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

    def _read_copy(self, content_hash: str) -> ReadCopy | None:
        """The read copy of ``content_hash`` (None when that version has none: the disk table and the
        store answer). A missing copy is looked for again on the next read (one ``stat``): an ingest writes
        it just after switching ``CURRENT``, and a long-lived process should not miss it."""
        with self._lock:
            if self._copy is None or self._copy[0] != content_hash or self._copy[1] is None:
                if self._copy is not None and self._copy[1] is not None:
                    self._copy[1].close()
                self._copy = (content_hash, ReadCopy.open(self.kb_dir, content_hash))
            return self._copy[1]

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
        """``call(reader)``: on the version's read copy when it has one, else from the disk table or on the
        store (and then kept)."""
        version = self._version()
        if version is None:
            return call(self.store())
        copy = self._read_copy(version[1])
        if copy is not None:
            return call(copy)
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

    # -- the doc search ----------------------------------------------------------------------------
    def doc_vectors(self) -> DocVectors | None:
        """The doc vectors' mirror of the current version when a search may use it (as the store's)."""
        version = self._version()
        if version is None:
            return self.store().doc_vectors()
        if self._vectors is None or self._vectors.content_hash != version[1]:
            self._vectors = DocVectors.load(self.kb_dir, version[1], self.embedder.model_key)
        limit = int(getattr(getattr(self.settings, "embed", None), "exact_search_max_docs", DEFAULT_MAX_DOCS))
        return self._vectors if self._vectors is not None and len(self._vectors) <= limit else None

    def search_docs(self, text: str, k: int = 5, methods: list[str] | None = None, *,
                    bottleneck: str | None = None, tier: str | None = None, structure: int | None = None) -> list[Any]:
        """The store's search: the exact search over the mirror, with the hits' text from the read copy,
        when the current version has both; otherwise the store searches (DuckDB, and Chroma without a
        mirror)."""
        if k <= 0 or methods == []:
            return []
        version = self._version()
        copy = self._read_copy(version[1]) if version is not None else None
        mirror = self.doc_vectors() if copy is not None else None
        if copy is None or mirror is None or mirror.content_hash != copy.content_hash:
            return self.store().search_docs(text, k=k, methods=methods, bottleneck=bottleneck, tier=tier,
                                            structure=structure)
        return copy.hits(mirror.search(query_vector(self.embedder, text), k, methods, bottleneck=bottleneck,
                                       tier=tier, structure=structure))

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        if self._store is not None:
            self._store.close()
        if self._copy is not None and self._copy[1] is not None:
            self._copy[1].close()
        self._copy = None
