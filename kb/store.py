"""The KB store: DuckDB (the truth, filtered in SQL) + a Chroma collection of SkillDocs (vector search).

Layout of ``kb_dir``::

    CURRENT                 {"db": "db/kb-<hash>-<stamp>.duckdb", "content_hash": ...} (atomic switch)
    db/kb-*.duckdb          one immutable DuckDB file per ingested version (current + previous kept)
    chroma/                 Chroma PersistentClient; collection ``skill_docs``; its metadata records the
                            content hash that the vectors are known to match
    vectors/<hash>.vec      the same doc vectors, for exact search without Chroma (``doc_vectors``)
    reads/<hash>.sqlite     the rows a query reads, so that it need not open DuckDB (``read_copy``)
    embed_cache.sqlite      sentence vectors by sha256(model, text)
    .write.lock             writers take it (flock); readers never wait

An ingest lints the whole batch (nothing is written on any error), encodes the docs, writes a complete
new DuckDB file in one transaction, switches ``CURRENT`` with an atomic rename, then upserts the changed
docs into Chroma, deletes stale ids and records the new hash in the collection. A crash before the switch
leaves the previous version untouched; a crash after it leaves Chroma behind, which :meth:`KBStore.doctor`
detects (hash and per-doc hash comparison) and repairs from DuckDB. Readers open DuckDB read-only and
re-open when ``CURRENT`` changes, so they never see a half-written file.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import logging
import os
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from kernelskill.errors import KernelskillError
from kernelskill.kb.doc_vectors import DEFAULT_MAX_DOCS, DocVectors, query_vector, write_mirror
from kernelskill.kb.lint import lint
from kernelskill.kb.loader import (
    SECTION_OF_TYPE,
    TYPE_OF_SECTION,
    SkillSet,
    canonical_json,
    object_hash,
)
from kernelskill.kb.read_copy import copy_path, write_read_copy
from kernelskill.kb.schema import (
    SCHEMA_VERSION,
    SECTIONS,
    Bottleneck,
    Case,
    Field,
    KBObject,
    Method,
    Predicate,
    SkillDoc,
    Tier,
    Veto,
)
from kernelskill.kb.sources import CURRENT

log = logging.getLogger(__name__)

DB_DIR = "db"
CHROMA_DIR = "chroma"
COLLECTION = "skill_docs"
LOCK = ".write.lock"

#: table -> (columns with DuckDB types, in order). Every table also has ``json`` (the full object).
TABLES: dict[str, dict[str, str]] = {
    "fields": {"id": "VARCHAR PRIMARY KEY", "kind": "VARCHAR", "type": "VARCHAR"},
    "predicates": {"id": "VARCHAR PRIMARY KEY", "expr": "VARCHAR"},
    "tiers": {"id": "VARCHAR PRIMARY KEY", "name": "VARCHAR", "field": "VARCHAR", "lower": "DOUBLE",
              "upper": "DOUBLE", "ord": "INTEGER"},
    "bottlenecks": {"id": "VARCHAR PRIMARY KEY", "name": "VARCHAR", "priority": "INTEGER"},
    "cases": {"id": "VARCHAR PRIMARY KEY", "title": "VARCHAR", "bottleneck": "VARCHAR", "tiers": "VARCHAR[]",
              "structures": "INTEGER[]", "priority": "INTEGER", "fallback": "BOOLEAN"},
    "vetoes": {"id": "VARCHAR PRIMARY KEY", "title": "VARCHAR"},
    "methods": {"id": "VARCHAR PRIMARY KEY", "name": "VARCHAR", "category": "VARCHAR", "tags": "VARCHAR[]",
                "bottlenecks": "VARCHAR[]", "structures": "INTEGER[]", "example_root": "VARCHAR"},
    "docs": {"id": "VARCHAR PRIMARY KEY", "method": "VARCHAR", "kind": "VARCHAR", "title": "VARCHAR",
             "text": "VARCHAR", "bottlenecks": "VARCHAR[]", "tiers": "VARCHAR[]", "structures": "INTEGER[]",
             "generated": "BOOLEAN", "doc_hash": "VARCHAR"},
}
MODELS: dict[str, type[KBObject]] = dict(SECTIONS)


class DocHit(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built on first use, not at import

    id: str
    method: str
    title: str
    text: str
    distance: float
    metadata: dict[str, Any]


class IngestReport(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built on first use, not at import

    changed: bool
    content_hash: str
    previous_hash: str | None
    counts: dict[str, int]
    upserted: int = 0
    deleted: int = 0
    encoded: int = 0
    seconds: float = 0.0


class DriftReport(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built on first use, not at import

    in_sync: bool
    duckdb_hash: str | None
    chroma_hash: str | None
    chroma_model: str | None
    embed_model: str
    duckdb_docs: int
    chroma_docs: int
    missing: list[str]  # in DuckDB, not in Chroma
    stale: list[str]  # in Chroma, not in DuckDB
    mismatched: list[str]  # different doc hash
    repaired: bool = False
    # objects versus skill files (filled by kb.curate.doctor_kb)
    sources_checked: bool = False
    pending_write: bool = False  # an add/import was interrupted; repair finishes or undoes it
    orphans: list[str] = []  # in the KB, but no skill file holds them any more (repair writes them back)
    unapplied: list[str] = []  # the skill files and the KB disagree on these ids (repair re-ingests)
    sources_error: str | None = None  # the skill files do not load
    recovered_file: str | None = None
    stray_temp_files: list[str] = []  # left in the user's skills folder by a killed writer (repair deletes)


def places_hash(skills: SkillSet) -> str:
    """sha256 over where each object is defined (file, line) and each method's worked-example folder: what
    the content hash leaves out."""
    h = hashlib.sha256()
    for oid in sorted(skills.locations):
        loc = skills.locations[oid]
        h.update(f"{oid}\x1f{loc.file}\x1f{loc.line}\x1f{skills.example_roots.get(oid, '')}\n".encode())
    return h.hexdigest()


def doc_embed_text(doc: SkillDoc) -> str:
    return embed_text(doc.title, doc.text)


def embed_text(title: str, text: str) -> str:
    """The text a SkillDoc's vector is computed from."""
    return f"{title}\n{text}"


def _row(section: str, obj: KBObject, skills: SkillSet | None) -> dict[str, Any]:
    """The scalar columns of one object (plus ``json``)."""
    j = canonical_json(obj)
    if isinstance(obj, Field):
        row = {"kind": obj.kind.value, "type": obj.type}
    elif isinstance(obj, Predicate):
        row = {"expr": obj.expr}
    elif isinstance(obj, Tier):
        row = {"name": obj.name, "field": obj.field, "lower": obj.lower, "upper": obj.upper, "ord": obj.order}
    elif isinstance(obj, Bottleneck):
        row = {"name": obj.name, "priority": obj.priority}
    elif isinstance(obj, Case):
        row = {"title": obj.title, "bottleneck": obj.bottleneck, "tiers": obj.tiers, "structures": obj.structures,
               "priority": obj.priority, "fallback": obj.fallback}
    elif isinstance(obj, Veto):
        row = {"title": obj.title}
    elif isinstance(obj, Method):
        root = skills.example_roots.get(obj.id) if skills is not None else None
        row = {"name": obj.name, "category": obj.category, "tags": obj.tags, "bottlenecks": obj.bottlenecks,
               "structures": obj.structures, "example_root": str(root) if root and obj.example else None}
    elif isinstance(obj, SkillDoc):
        row = {"method": obj.method, "kind": obj.kind, "title": obj.title, "text": obj.text,
               "bottlenecks": obj.bottlenecks, "tiers": obj.tiers, "structures": obj.structures,
               "generated": bool(skills and obj.id in skills.generated), "doc_hash": object_hash(obj)}
    else:  # pragma: no cover
        raise TypeError(section)
    return {"id": obj.id, **row, "json": j}


def _doc_metadata(doc: SkillDoc, doc_hash: str, generated: bool) -> dict[str, Any]:
    return _metadata(doc.method, doc.kind, doc.title, doc_hash, generated, doc.bottlenecks, doc.tiers,
                     doc.structures)


def _metadata(method: str, kind: str, title: str, doc_hash: str, generated: bool, bottlenecks: list[str],
              tiers: list[str], structures: list[int]) -> dict[str, Any]:
    """A doc's Chroma metadata (also what the exact mirror search returns as a hit's metadata)."""
    meta: dict[str, Any] = {"method": method, "kind": kind, "title": title, "doc_hash": doc_hash,
                            "generated": bool(generated), "any_bottleneck": not bottlenecks,
                            "any_tier": not tiers, "any_structure": not structures}
    # Chroma 1.5 stores list metadata and filters it with $contains; it rejects empty lists.
    if bottlenecks:
        meta["bottlenecks"] = list(bottlenecks)
    if tiers:
        meta["tiers"] = list(tiers)
    if structures:
        meta["structures"] = [int(s) for s in structures]
    return meta


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(str(path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class _WriterLock:
    """An exclusive ``flock`` on ``<kb_dir>/.write.lock`` between processes, re-entrant inside one process
    (one thread at a time): the first ``hold`` takes the file lock, nested ones only count."""

    _by_dir: dict[str, _WriterLock] = {}
    _guard = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        self._rlock = threading.RLock()
        self._depth = 0
        self._fh: Any = None

    @classmethod
    def for_dir(cls, kb_dir: Path) -> _WriterLock:
        key = str(Path(kb_dir).resolve())
        with cls._guard:
            if key not in cls._by_dir:
                cls._by_dir[key] = cls(Path(key) / LOCK)
            return cls._by_dir[key]

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self._rlock:
            if self._depth == 0:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fh = self.path.open("a")
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                except BaseException:
                    fh.close()
                    raise
                self._fh = fh
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    fh, self._fh = self._fh, None
                    with contextlib.suppress(OSError):
                        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
                    fh.close()


class KBStore:
    """Open with :meth:`open`; every read filters in SQL; writes go through :meth:`ingest`."""

    def __init__(self, kb_dir: Path, *, read_only: bool, embed_settings: Any = None, embedder: Any = None) -> None:
        self.kb_dir = Path(kb_dir)
        self.read_only = read_only
        self._embed_settings = embed_settings
        self._embedder = embedder
        self._con: Any = None
        self._con_db: str | None = None
        self._client: Any = None
        self._collection: Any = None
        self._vectors: DocVectors | None = None

    # -- opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, kb_dir: Path, *, read_only: bool = False, embed_settings: Any = None,
             embedder: Any = None) -> KBStore:
        kb_dir = Path(kb_dir)
        store = cls(kb_dir, read_only=read_only, embed_settings=embed_settings, embedder=embedder)
        if not store.exists():
            if read_only:
                raise KernelskillError(f"{kb_dir}: no knowledge base here (run 'kernelskill kb init')")
            kb_dir.mkdir(parents=True, exist_ok=True)
        return store

    def exists(self) -> bool:
        return (self.kb_dir / CURRENT).is_file()

    def is_empty(self) -> bool:
        return not self.exists() or sum(self.counts().values()) == 0

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from kernelskill.kb.embed import Embedder

            self._embedder = Embedder.get(self._embed_settings, cache_dir=self.kb_dir)
        return self._embedder

    def _current(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.kb_dir / CURRENT).read_text())
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise KernelskillError(f"{self.kb_dir / CURRENT}: corrupt pointer file ({exc})") from exc

    def _db(self) -> Any:
        """A read-only DuckDB connection to the current version (re-opened when it changes)."""
        import duckdb

        for _ in range(5):
            cur = self._current()
            if cur is None:
                raise KernelskillError(f"{self.kb_dir}: no knowledge base here (run 'kernelskill kb init')")
            if self._con is not None and self._con_db == cur["db"]:
                return self._con
            self.close_db()
            try:
                self._con = duckdb.connect(str(self.kb_dir / cur["db"]), read_only=True)
                self._con_db = cur["db"]
                return self._con
            except (duckdb.IOException, duckdb.Error) as exc:  # switched and cleaned up under us: retry
                log.debug("re-reading %s after %s", CURRENT, exc)
                time.sleep(0.05)
        raise KernelskillError(f"{self.kb_dir}: cannot open the current DuckDB file")

    def close_db(self) -> None:
        if self._con is not None:
            with contextlib.suppress(Exception):
                self._con.close()
        self._con = None
        self._con_db = None

    def close(self) -> None:
        self.close_db()
        self._collection = None
        self._client = None

    def __enter__(self) -> KBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _chroma(self) -> Any:
        if self._client is None:
            import chromadb
            from chromadb.config import Settings as ChromaSettings

            path = self.kb_dir / CHROMA_DIR
            path.mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(
                path=str(path), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False))
        return self._client

    def _coll(self, create: bool = False) -> Any:
        if self._collection is None:
            client = self._chroma()
            if create:
                self._collection = client.get_or_create_collection(
                    COLLECTION, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
            else:
                try:
                    self._collection = client.get_collection(COLLECTION, embedding_function=None)
                except Exception:  # noqa: BLE001 - chroma raises several types for "not found"
                    return None
        return self._collection

    def writer(self) -> contextlib.AbstractContextManager[None]:
        """The KB's writer lock. Curation holds it across read-sources / validate / place files / ingest,
        so two writers never build on the same old state; :meth:`ingest` takes it again (re-entrant)."""
        if self.read_only:
            raise KernelskillError(f"{self.kb_dir}: the store is open read-only")
        return _WriterLock.for_dir(self.kb_dir).hold()

    def _write_lock(self) -> contextlib.AbstractContextManager[None]:
        return self.writer()

    # -- reads --------------------------------------------------------------------------------
    def _objects(self, table: str, where: str = "", params: list[Any] | None = None,
                 order: str = "id") -> list[Any]:
        sql = f"SELECT json FROM {table} {('WHERE ' + where) if where else ''} ORDER BY {order}"
        model = MODELS[table]
        return [model.model_validate_json(r[0]) for r in self._db().execute(sql, params or []).fetchall()]

    def fields(self) -> list[Field]:
        return self._objects("fields")

    def predicates(self) -> list[Predicate]:
        return self._objects("predicates")

    def tiers(self) -> list[Tier]:
        return self._objects("tiers", order="ord, id")

    def bottlenecks(self) -> list[Bottleneck]:
        return self._objects("bottlenecks", order="priority, id")

    def vetoes(self) -> list[Veto]:
        return self._objects("vetoes")

    def docs(self) -> list[SkillDoc]:
        return self._objects("docs")

    def cases(self) -> list[Case]:
        return self._objects("cases", order="priority, id")

    def cases_for(self, bottleneck: str | None, tier: str | None, structure: int | None, *,
                  fallback: bool = False) -> list[Case]:
        """Cases for a bottleneck (or the fallback cases) whose tiers/structures admit ``tier``/``structure``
        (an empty list admits anything, ``None`` matches only an empty list), by ``priority, id``."""
        if fallback:
            where = ["fallback", "(bottleneck IS NULL OR bottleneck = ?)"]
        else:
            where = ["NOT fallback", "bottleneck = ?"]
        params: list[Any] = [bottleneck]
        where.append("(len(tiers) = 0 OR list_contains(tiers, ?))")
        params.append(tier)
        where.append("(len(structures) = 0 OR list_contains(structures, ?))")
        params.append(structure)
        return self._objects("cases", " AND ".join(where), params, order="priority, id")

    def methods(self, ids: list[str] | None = None) -> list[Method]:
        if ids is None:
            return self._objects("methods")
        if not ids:
            return []
        found = {m.id: m for m in self._objects("methods", "list_contains(?, id)", [list(ids)])}
        return [found[i] for i in ids if i in found]

    def example_root(self, method_id: str) -> Path | None:
        row = self._db().execute("SELECT example_root FROM methods WHERE id = ?", [method_id]).fetchone()
        return Path(row[0]) if row and row[0] else None

    def get(self, obj_id: str) -> KBObject | None:
        con = self._db()
        row = con.execute("SELECT section FROM objects WHERE id = ?", [obj_id]).fetchone()
        if row is None or row[0] not in TABLES:
            return None
        found = con.execute(f"SELECT json FROM {row[0]} WHERE id = ?", [obj_id]).fetchone()
        return MODELS[row[0]].model_validate_json(found[0]) if found else None

    def location(self, obj_id: str) -> str | None:
        row = self._db().execute("SELECT file, line FROM objects WHERE id = ?", [obj_id]).fetchone()
        return f"{row[0]}:{row[1]}" if row else None

    def list_objects(self, type_: str | None = None, bottleneck: str | None = None) -> list[dict[str, Any]]:
        """Rows ``{type, id, title, location}`` for the CLI, filtered in SQL."""
        sections = [SECTION_OF_TYPE[type_]] if type_ else list(TABLES)
        out: list[dict[str, Any]] = []
        con = self._db()
        for section in sections:
            title = {"fields": "description", "predicates": "expr", "tiers": "name", "bottlenecks": "name",
                     "cases": "title", "vetoes": "title", "methods": "name", "docs": "title"}[section]
            if section in ("fields",):
                title_sql = "json_extract_string(t.json, '$.description')"
            else:
                title_sql = f"t.{title}"
            where, params = "", []
            if bottleneck:
                cond = {"cases": "t.bottleneck = ?", "bottlenecks": "t.id = ?",
                        "methods": "list_contains(t.bottlenecks, ?)", "docs": "list_contains(t.bottlenecks, ?)"}
                if section not in cond:
                    continue
                where, params = f"WHERE {cond[section]}", [bottleneck]
            rows = con.execute(f"SELECT t.id, {title_sql}, o.file, o.line FROM {section} t JOIN objects o "
                               f"USING (id) {where} ORDER BY t.id", params).fetchall()
            out.extend({"type": TYPE_OF_SECTION[section], "id": r[0], "title": r[1], "location": f"{r[2]}:{r[3]}"}
                       for r in rows)
        return out

    def counts(self) -> dict[str, int]:
        con = self._db()
        return {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}

    def meta(self) -> dict[str, Any]:
        rows = self._db().execute("SELECT key, value FROM meta").fetchall()
        return {k: json.loads(v) for k, v in rows}

    def content_hash(self) -> str | None:
        if not self.exists():
            return None
        return self.meta().get("content_hash")

    def skillset(self) -> SkillSet:
        """Everything in the store as a :class:`SkillSet` (locations from the ``objects`` table)."""
        from kernelskill.kb.loader import Location

        out = SkillSet()
        con = self._db()
        for section in TABLES:
            for obj in self._objects(section):
                out.add(section, obj, Location("<kb>", 0))
        for oid, file, line in con.execute("SELECT id, file, line FROM objects").fetchall():
            out.locations[oid] = Location(file, line)
        out.generated = {r[0] for r in con.execute("SELECT id FROM docs WHERE generated").fetchall()}
        for mid, root in con.execute("SELECT id, example_root FROM methods WHERE example_root IS NOT NULL"
                                     ).fetchall():
            out.example_roots[mid] = Path(root)
        return out

    def stats(self) -> dict[str, Any]:
        meta = self.meta()
        coll = self._coll()
        chroma_meta = dict(coll.metadata or {}) if coll is not None else {}
        return {
            "kb_dir": str(self.kb_dir),
            "schema_version": meta.get("schema_version"),
            "content_hash": meta.get("content_hash"),
            "counts": self.counts(),
            "backing": self.backing(),
            "ingested_at": meta.get("ingested_at"),
            "files": len(meta.get("files", [])),
            "embed_model": meta.get("embed_model"),
            "chroma": {"docs": int(coll.count()) if coll is not None else 0,
                       "content_hash": chroma_meta.get("content_hash"),
                       "in_sync": chroma_meta.get("content_hash") == meta.get("content_hash")},
        }

    def backing(self) -> dict[str, int]:
        """How the methods are backed: with a worked example, with a measured evidence record, and what
        the latest measurement said (pays / no_gain / slower)."""
        methods = self.methods()
        out = {"methods": len(methods), "with_example": sum(1 for m in methods if m.example is not None),
               "measured": 0, "pays": 0, "no_gain": 0, "slower": 0}
        for m in methods:
            latest = m.latest_measurement()
            if latest is not None:
                out["measured"] += 1
                if latest.verdict:
                    out[latest.verdict] += 1
        return out

    # -- vector search ------------------------------------------------------------------------
    def exact_search_limit(self) -> int:
        """Up to this many docs a search scans the doc vectors' mirror instead of asking Chroma
        (``embed.exact_search_max_docs``; 0 turns the mirror off)."""
        return int(getattr(self._embed_settings, "exact_search_max_docs", DEFAULT_MAX_DOCS))

    def doc_vectors(self) -> DocVectors | None:
        """The mirror of the current version's doc vectors when a search may use it, else None.

        Only the ``CURRENT`` pointer and the mirror file are read (no DuckDB, no Chroma); the mirror is
        used when it was written for the content hash ``CURRENT`` names and for the embedder's model."""
        cur = self._current()
        content = (cur or {}).get("content_hash")
        if not content:
            return None
        if self._vectors is None or self._vectors.content_hash != content:
            self._vectors = DocVectors.load(self.kb_dir, content, self.embedder.model_key)
        mirror = self._vectors
        if mirror is None or len(mirror) > self.exact_search_limit():
            return None
        return mirror

    def search_docs(self, text: str, k: int = 5, methods: list[str] | None = None, *,
                    bottleneck: str | None = None, tier: str | None = None,
                    structure: int | None = None) -> list[DocHit]:
        """Nearest SkillDocs by cosine distance, filtered by method, and optionally bottleneck / tier /
        structure, where a doc without such tags matches any. Up to ``exact_search_limit()`` docs the
        search is exact over the vector mirror (Chroma is not opened); otherwise Chroma answers, filtered
        in its ``where``. Text and title come from DuckDB, so a hit that DuckDB no longer has (drift after a
        crash) is dropped."""
        if k <= 0 or methods == []:
            return []
        mirror = self.doc_vectors()
        if mirror is not None:
            found = mirror.search(query_vector(self.embedder, text), k, methods, bottleneck=bottleneck, tier=tier,
                                  structure=structure)
            return self._hits([i for i, _ in found], [d for _, d in found], None)
        coll = self._coll()
        if coll is None:
            return []
        clauses: list[dict[str, Any]] = []
        if methods:
            clauses.append({"method": {"$in": list(methods)}})
        for key, any_key, value in (("bottlenecks", "any_bottleneck", bottleneck), ("tiers", "any_tier", tier),
                                    ("structures", "any_structure", structure)):
            if value is not None:
                clauses.append({"$or": [{key: {"$contains": value}}, {any_key: True}]})
        where = clauses[0] if len(clauses) == 1 else ({"$and": clauses} if clauses else None)
        n = min(k, int(coll.count()))
        if n == 0:
            return []
        vec = self.embedder.encode_array([text])
        res = coll.query(query_embeddings=vec, n_results=n, where=where, include=["metadatas", "distances"])
        return self._hits(res["ids"][0], res["distances"][0], res["metadatas"][0])

    def _hits(self, ids: list[str], distances: list[float], metas: list[Any] | None) -> list[DocHit]:
        """DocHits for the found ids, with text and title from DuckDB (and, for the vector mirror, the
        metadata Chroma would have returned, rebuilt from the doc's row)."""
        if not ids:
            return []
        rows = self._db().execute("SELECT d.id, d.method, d.title, d.text, d.kind, d.doc_hash, d.generated, "
                                  "d.bottlenecks, d.tiers, d.structures FROM docs d JOIN "
                                  "(SELECT unnest(?::VARCHAR[]) AS id) q USING (id)", [ids]).fetchall()
        by_id = {r[0]: r for r in rows}
        hits: list[DocHit] = []
        for pos, (i, dist) in enumerate(zip(ids, distances, strict=True)):
            row = by_id.get(i)
            if row is None:
                log.warning("search: %s is in Chroma but not in DuckDB (run 'kernelskill kb doctor --repair')", i)
                continue
            meta = metas[pos] if metas is not None else _metadata(row[1], row[4], row[2], row[5], row[6],
                                                                   row[7] or [], row[8] or [], row[9] or [])
            hits.append(DocHit(id=i, method=row[1], title=row[2], text=row[3], distance=float(dist),
                               metadata=dict(meta or {})))
        return hits

    def _query_files_missing(self, content_hash: str) -> bool:
        """Is the read copy of ``content_hash`` missing, or its doc vectors' mirror when searches use one?"""
        if not copy_path(self.kb_dir, content_hash).is_file():
            return True
        return (self.counts().get("docs", 0) <= self.exact_search_limit()
                and DocVectors.load(self.kb_dir, content_hash, self.embedder.model_key) is None)

    def _write_query_files(self, content_hash: str) -> None:
        """Write the current version's read copy (``read_copy``), then mirror its doc vectors for exact
        search (all cached by the embedder after an ingest, so nothing is encoded again). A failure only
        costs speed: queries read DuckDB, searches fall back to Chroma."""
        try:
            write_read_copy(self.kb_dir, content_hash, self._db(), self.counts(), _metadata)
        except (OSError, ValueError, sqlite3.Error) as exc:
            log.warning("KB read copy not written (%s); queries read DuckDB", exc)
        try:
            count = int(self._db().execute("SELECT count(*) FROM docs").fetchone()[0])
            if count > self.exact_search_limit():  # searches go to Chroma: a mirror would not be read
                return
            rows = self._db().execute("SELECT id, method, title, text, bottlenecks, tiers, structures FROM docs "
                                      "ORDER BY id").fetchall()
            vecs = self.embedder.encode_array([embed_text(r[2], r[3]) for r in rows])
            write_mirror(self.kb_dir, content_hash, self.embedder.model_key, [r[0] for r in rows],
                         [r[1] for r in rows], [(r[4] or [], r[5] or [], r[6] or []) for r in rows], vecs)
            self._vectors = None
        except (OSError, ValueError) as exc:
            log.warning("doc vectors for exact search not written (%s); searches use Chroma", exc)

    # -- writes -------------------------------------------------------------------------------
    def ingest(self, skills: SkillSet, *, check: bool = True) -> IngestReport:
        """Replace the KB's content with ``skills``, all or nothing; a no-op when the content hash and
        Chroma's recorded hash already equal the new hash."""
        t0 = time.perf_counter()
        if check:
            report = lint(skills)
            if report.errors:
                # name the mistake itself first: a dead end is usually the consequence of another error
                first = next((e for e in report.errors if e.code != "dead_end"), report.errors[0])
                more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
                raise KernelskillError(f"{first.file}:{first.line}: {first.message}{more}")
        new_hash = skills.content_hash()
        with self._write_lock():
            old_hash = self.content_hash()
            coll = self._coll()
            chroma_meta = dict(coll.metadata or {}) if coll is not None else {}
            same_model = chroma_meta.get("embed_model") == self.embedder.model_key
            if old_hash == new_hash and chroma_meta.get("content_hash") == new_hash and same_model:
                log.info("ingest: content unchanged (%s)", new_hash[:12])
                if self.meta().get("places_hash") != places_hash(skills):
                    # same objects, new places (a file recovered, moved or copied into the home; a KB written
                    # before places were recorded): the objects' files and worked-example folders are
                    # rewritten, nothing is embedded again
                    self._write_duckdb(skills, new_hash)
                    self._write_query_files(new_hash)
                elif self._query_files_missing(new_hash):
                    self._write_query_files(new_hash)  # a KB built before the mirror or the read copy existed
                return IngestReport(changed=False, content_hash=new_hash, previous_hash=old_hash,
                                    counts=skills.counts(), seconds=time.perf_counter() - t0)
            encoded_before = self.embedder.encoded
            if old_hash != new_hash:
                # Encode first: a failure here leaves everything as it was.
                self.embedder.encode_array([doc_embed_text(d) for d in skills.docs])
                self._write_duckdb(skills, new_hash)
            upserted, deleted = self._sync_chroma(new_hash)
            self._write_query_files(new_hash)
        return IngestReport(changed=True, content_hash=new_hash, previous_hash=old_hash, counts=skills.counts(),
                            upserted=upserted, deleted=deleted, encoded=self.embedder.encoded - encoded_before,
                            seconds=time.perf_counter() - t0)

    def _write_duckdb(self, skills: SkillSet, new_hash: str) -> None:
        import duckdb

        db_dir = self.kb_dir / DB_DIR
        db_dir.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        name = f"kb-{new_hash[:16]}-{stamp}.duckdb"
        tmp = db_dir / f".{name}.tmp"
        con = duckdb.connect(str(tmp))
        try:
            con.execute("BEGIN TRANSACTION")
            for table, cols in TABLES.items():
                col_sql = ", ".join(f"{c} {t}" for c, t in cols.items())
                con.execute(f"CREATE TABLE {table} ({col_sql}, json VARCHAR NOT NULL)")
                rows = [_row(table, o, skills) for o in getattr(skills, table)]
                self._bulk_insert(con, table, {**{c: t.replace(" PRIMARY KEY", "") for c, t in cols.items()},
                                               "json": "VARCHAR"}, rows)
            con.execute("CREATE TABLE objects (id VARCHAR PRIMARY KEY, section VARCHAR, file VARCHAR, line INTEGER)")
            obj_rows = [{"id": o.id, "section": s, "file": skills.locations[o.id].file,
                         "line": skills.locations[o.id].line} for s, o in skills.objects()]
            self._bulk_insert(con, "objects", {"id": "VARCHAR", "section": "VARCHAR", "file": "VARCHAR",
                                               "line": "INTEGER"}, obj_rows)
            con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            meta = {"schema_version": SCHEMA_VERSION, "content_hash": new_hash, "counts": skills.counts(),
                    "ingested_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                    "embed_model": self.embedder.model_key, "files": sorted(set(skills.files)),
                    "places_hash": places_hash(skills)}
            con.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
            con.execute("COMMIT")
            con.execute("CHECKPOINT")
        except BaseException:
            with contextlib.suppress(Exception):
                con.close()
            for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
                leftover.unlink(missing_ok=True)
            raise
        con.close()
        previous = self._current()
        final = db_dir / name
        os.replace(tmp, final)
        _fsync_dir(db_dir)
        try:  # the commit point: CURRENT names the new file
            _write_atomic(self.kb_dir / CURRENT, json.dumps({"db": f"{DB_DIR}/{name}", "content_hash": new_hash}))
        except BaseException:
            final.unlink(missing_ok=True)
            raise
        keep = {final.name}
        if previous:
            keep.add(Path(previous["db"]).name)
        self._cleanup(keep)

    @staticmethod
    def _bulk_insert(con: Any, table: str, columns: dict[str, str], rows: list[dict[str, Any]]) -> None:
        """Insert through a newline-delimited JSON file (far faster than executemany)."""
        if not rows:
            return
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False))
                fh.write("\n")
            path = fh.name
        try:
            spec = "{" + ", ".join(f"'{c}': '{t}'" for c, t in columns.items()) + "}"
            cols = ", ".join(columns)
            con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM read_json(?, format='newline_delimited', "
                        f"columns={spec}, maximum_object_size=67108864)", [path])
        finally:
            os.unlink(path)

    def _cleanup(self, keep: set[str]) -> None:
        """Delete every version but the current and the previous one (a reader may still hold it)."""
        db_dir = self.kb_dir / DB_DIR
        for p in db_dir.glob("kb-*.duckdb"):
            if p.name not in keep:
                p.unlink(missing_ok=True)
                p.with_name(p.name + ".wal").unlink(missing_ok=True)
        for p in db_dir.glob(".kb-*.tmp*"):
            if time.time() - p.stat().st_mtime > 3600:
                p.unlink(missing_ok=True)

    def _duck_docs(self) -> dict[str, str]:
        return dict(self._db().execute("SELECT id, doc_hash FROM docs").fetchall())

    def _chroma_docs(self, coll: Any) -> dict[str, str]:
        out: dict[str, str] = {}
        total = int(coll.count())
        step = 5000
        for offset in range(0, total, step):
            got = coll.get(include=["metadatas"], limit=step, offset=offset)
            for i, m in zip(got["ids"], got["metadatas"], strict=True):
                out[i] = (m or {}).get("doc_hash", "")
        return out

    def _sync_chroma(self, target_hash: str) -> tuple[int, int]:
        """Make Chroma match DuckDB: upsert changed docs, delete stale ids, then record the hash."""
        coll = self._coll(create=True)
        model = self.embedder.model_key
        if (coll.metadata or {}).get("embed_model") not in (None, model):
            log.info("embedding model changed: rebuilding the Chroma collection")
            self._chroma().delete_collection(COLLECTION)
            self._collection = None
            coll = self._coll(create=True)
        have = self._chroma_docs(coll)
        want = self._duck_docs()
        todo = [i for i, h in want.items() if have.get(i) != h]
        stale = [i for i in have if i not in want]
        batch = max(1, min(5000, int(self._chroma().get_max_batch_size())))
        for start in range(0, len(todo), batch):
            chunk = todo[start:start + batch]
            rows = self._db().execute("SELECT d.json, d.doc_hash, d.generated FROM docs d JOIN "
                                      "(SELECT unnest(?::VARCHAR[]) AS id) q USING (id)", [chunk]).fetchall()
            docs = [(SkillDoc.model_validate_json(j), h, g) for j, h, g in rows]
            vecs = self.embedder.encode_array([doc_embed_text(d) for d, _, _ in docs])
            coll.upsert(ids=[d.id for d, _, _ in docs], embeddings=vecs,
                        metadatas=[_doc_metadata(d, h, g) for d, h, g in docs],
                        documents=[d.text for d, _, _ in docs])
        for start in range(0, len(stale), batch):
            coll.delete(ids=stale[start:start + batch])
        coll.modify(metadata={"content_hash": target_hash, "embed_model": model})
        return len(todo), len(stale)

    def doctor(self, repair: bool = False) -> DriftReport:
        """Compare DuckDB and Chroma (hash, ids, per-doc hashes); with ``repair`` re-sync Chroma."""
        duck_hash = self.content_hash()
        coll = self._coll()
        meta = dict(coll.metadata or {}) if coll is not None else {}
        have = self._chroma_docs(coll) if coll is not None else {}
        want = self._duck_docs()
        missing = sorted(i for i in want if i not in have)
        stale = sorted(i for i in have if i not in want)
        mismatched = sorted(i for i in want if i in have and have[i] != want[i])
        model = self.embedder.model_key
        in_sync = (not missing and not stale and not mismatched and meta.get("content_hash") == duck_hash
                   and meta.get("embed_model") == model)
        report = DriftReport(in_sync=in_sync, duckdb_hash=duck_hash, chroma_hash=meta.get("content_hash"),
                             chroma_model=meta.get("embed_model"), embed_model=model, duckdb_docs=len(want),
                             chroma_docs=len(have), missing=missing, stale=stale, mismatched=mismatched)
        if repair and not in_sync:
            with self._write_lock():
                self._sync_chroma(duck_hash or "")
                if duck_hash:
                    self._write_query_files(duck_hash)
            report.repaired = True
        elif repair and duck_hash and self._query_files_missing(duck_hash):
            with self._write_lock():  # Chroma is fine; only the mirror or the read copy is missing
                self._write_query_files(duck_hash)
        return report

    def drifted(self) -> bool:
        """Cheap check: does Chroma record the current content hash and embedding model?"""
        coll = self._coll()
        meta = dict(coll.metadata or {}) if coll is not None else {}
        return meta.get("content_hash") != self.content_hash() or meta.get("embed_model") != self.embedder.model_key
