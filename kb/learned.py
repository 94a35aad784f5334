"""The learned store: evidence that optimize runs produced, kept next to the curated KB.

A learned record is one verified improvement of a run: an accepted candidate that applied a method to its
parent, passed the harness's checks and was faster than the parent beyond the timing noise. It says which
method, on what kind of kernel (op family, static features, bottleneck), before and after (files, source
hashes and the sources themselves), by how much (over the parent and over eager PyTorch), under which
protocol, on which GPU, in which run.

Layout under ``<kb_dir>/learned/``::

    learned.duckdb    table ``learned``: the truth (one row per record, the full record as JSON)
    chroma/           collection ``learned_evidence``: one vector per record (the kernel it was learned on)
    .lock             writers take it (flock)

The curated KB is rebuilt from its skill files on every ingest; this store is not, so a re-init keeps it.
Writes are all or nothing and idempotent: a record's id is derived from its run, step and after-source
hash, records already present are skipped, the vectors are encoded before anything is written, the rows
go in one DuckDB transaction, and a Chroma failure after it removes those rows again. Chroma is re-synced
from DuckDB when they differ (an interrupted write).

This module knows nothing about runs or queries (``kb`` sits below both): the loop's side builds the
records, the command layer wires the two.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernelskill.errors import KernelskillError

log = logging.getLogger(__name__)

LEARNED_DIR = "learned"
DB_NAME = "learned.duckdb"
CHROMA_DIR = "chroma"
COLLECTION = "learned_evidence"
LOCK = ".lock"
#: the export's file of records (one JSON record per line, sources included)
EXPORT_FILE = "learned/records.jsonl"
#: characters of kernel source that go into the text a record is found by
SOURCE_CHARS = 1500


class LearnedRecord(BaseModel):
    """One verified improvement of a run, as evidence for its method."""

    model_config = ConfigDict(extra="forbid")

    id: str
    run_id: str
    step: str  # the loop step that produced the after file (``r02.optimize``)
    method: str
    op_family: str | None = None
    bottleneck: str | None = None
    tier: str | None = None
    case: str | None = None  # the KB case the run's query matched for the parent
    features: dict[str, bool | int] = Field(default_factory=dict)
    task_name: str = ""
    before_file: str  # run-relative
    after_file: str
    before_hash: str  # sha256 of the source
    after_hash: str
    before_source: str = ""
    after_source: str = ""
    before_ms: float
    after_ms: float
    before_iqr_ms: float | None = None
    after_iqr_ms: float | None = None
    speedup: float  # before_ms / after_ms: over the parent
    before_vs_eager: float | None = None  # each variant's speedup over eager PyTorch, as the harness measured
    after_vs_eager: float | None = None
    reverified_vs_eager: float | None = None  # the final re-verification on a fresh seed, when the run did it
    reverified: bool = False
    protocol: str
    hardware: str
    learned_at: str = ""
    #: the KB method this run's method is, when ``method`` is not a KB id (``kb learn``'s mapping, with its
    #: score); the record then counts as evidence for that KB method
    kb_method: str | None = None
    kb_method_score: float | None = None

    @property
    def as_method(self) -> str:
        """The KB method the record is evidence for: the mapped one, else the run's own name."""
        return self.kb_method or self.method

    def line(self) -> str:
        """``kernel_fusion: 3.72x over its parent (after 2.19x vs eager), elementwise, memory_bandwidth,
        NVIDIA H200, strict, run X``."""
        eager = f" (after {self.after_vs_eager:.2f}x vs eager)" if self.after_vs_eager else ""
        kind = ", ".join(x for x in (self.op_family, self.bottleneck) if x)
        name = f"{self.method} (= {self.kb_method})" if self.kb_method else self.method
        return (f"{name}: {self.speedup:.2f}x over its parent{eager}{', ' + kind if kind else ''}, "
                f"{self.hardware}, protocol {self.protocol}, run {self.run_id} {self.step}")


class LearnedHit(BaseModel):
    """A learned record found for a kernel: the fields a prompt shows, and how close the kernel was."""

    id: str
    method: str
    similarity: float  # 1 - cosine distance
    speedup: float
    after_vs_eager: float | None = None
    op_family: str | None = None
    bottleneck: str | None = None
    hardware: str = ""
    protocol: str = ""
    run_id: str = ""
    task_name: str = ""
    reverified: bool = False


def record_id(run_id: str, step: str, after_hash: str) -> str:
    return "learned-" + hashlib.sha256(f"{run_id}\n{step}\n{after_hash}".encode()).hexdigest()[:16]


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/|^\s*#[^\n]*", re.S | re.M)


def kernel_text(source: str, op_family: str | None, bottleneck: str | None) -> str:
    """The text a kernel is embedded by, on both sides (a record's parent, a queried kernel): its op and
    bottleneck, then its source without comments or blank lines, cut to ``SOURCE_CHARS``."""
    body = "\n".join(ln.rstrip() for ln in _COMMENT_RE.sub("", source).splitlines() if ln.strip())
    return f"op {op_family or 'unknown'}; bottleneck {bottleneck or 'unknown'}\n{body[:SOURCE_CHARS]}"


class LearnedStore:
    """``LearnedStore(kb_dir, embed_settings)``: add, list, search, export and import learned records."""

    def __init__(self, kb_dir: Path, *, embed_settings: Any = None, embedder: Any = None) -> None:
        self.kb_dir = Path(kb_dir)
        self.dir = self.kb_dir / LEARNED_DIR
        self._embed_settings = embed_settings
        self._embedder = embedder
        self._client: Any = None

    # -- plumbing --------------------------------------------------------------------------------
    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from kernelskill.kb.embed import Embedder

            self._embedder = Embedder.get(self._embed_settings, cache_dir=self.kb_dir)
        return self._embedder

    @property
    def db_path(self) -> Path:
        return self.dir / DB_NAME

    def exists(self) -> bool:
        return self.db_path.is_file()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / LOCK).open("a") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _connect(self, read_only: bool) -> Any:
        import duckdb  # heavy: imported when the store is used

        try:
            con = duckdb.connect(str(self.db_path), read_only=read_only)
        except duckdb.Error as exc:
            raise KernelskillError(f"{self.db_path}: cannot open the learned store ({str(exc).splitlines()[0]})"
                                   ) from exc
        if not read_only:
            con.execute("CREATE TABLE IF NOT EXISTS learned (id VARCHAR PRIMARY KEY, run_id VARCHAR, "
                        "method VARCHAR, op_family VARCHAR, bottleneck VARCHAR, speedup DOUBLE, json VARCHAR)")
        return con

    def _coll(self) -> Any:
        if self._client is None:
            import chromadb  # heavy: imported when the store is used
            from chromadb.config import Settings as ChromaSettings

            path = self.dir / CHROMA_DIR
            path.mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(
                path=str(path), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False))
        return self._client.get_or_create_collection(COLLECTION, embedding_function=None,
                                                     configuration={"hnsw": {"space": "cosine"}})

    # -- reads -----------------------------------------------------------------------------------
    def records(self, method: str | None = None) -> list[LearnedRecord]:
        if not self.exists():
            return []
        con = self._connect(read_only=True)
        try:
            sql = "SELECT json FROM learned" + (" WHERE method = ?" if method else "") + " ORDER BY run_id, id"
            rows = con.execute(sql, [method] if method else []).fetchall()
        finally:
            con.close()
        return [LearnedRecord.model_validate_json(r[0]) for r in rows]

    def ids(self) -> set[str]:
        if not self.exists():
            return set()
        con = self._connect(read_only=True)
        try:
            return {r[0] for r in con.execute("SELECT id FROM learned").fetchall()}
        finally:
            con.close()

    def count(self) -> int:
        return len(self.ids())

    def stats(self) -> dict[str, Any]:
        recs = self.records()
        by_method: dict[str, int] = {}
        for r in recs:
            by_method[r.as_method] = by_method.get(r.as_method, 0) + 1
        return {"records": len(recs), "runs": len({r.run_id for r in recs}), "methods": dict(sorted(by_method.items()))}

    # -- writes ----------------------------------------------------------------------------------
    def add(self, records: Sequence[LearnedRecord]) -> list[str]:
        """Add the records not already present (by id), all or nothing; returns the ids added."""
        recs = list({r.id: r for r in records}.values())
        if not recs:
            return []
        with self._locked():
            have = self.ids()
            new = [r for r in recs if r.id not in have]
            if not new:
                self._sync_chroma()
                return []
            stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
            new = [r if r.learned_at else r.model_copy(update={"learned_at": stamp}) for r in new]
            vecs = self.embedder.encode_array([kernel_text(r.before_source, r.op_family, r.bottleneck)
                                               for r in new])  # a failure here writes nothing
            con = self._connect(read_only=False)
            try:
                con.execute("BEGIN TRANSACTION")
                con.executemany("INSERT INTO learned VALUES (?, ?, ?, ?, ?, ?, ?)",
                                [(r.id, r.run_id, r.method, r.op_family, r.bottleneck, r.speedup,
                                  r.model_dump_json()) for r in new])
                con.execute("COMMIT")
            finally:
                con.close()
            try:
                self._coll().upsert(ids=[r.id for r in new], embeddings=vecs, metadatas=[_meta(r) for r in new])
            except BaseException:
                self._delete_rows([r.id for r in new])  # all or nothing: the rows go with the vectors
                raise
            self._sync_chroma()
        return [r.id for r in new]

    def _delete_rows(self, ids: list[str]) -> None:
        con = self._connect(read_only=False)
        try:
            con.execute("DELETE FROM learned WHERE id IN (SELECT unnest(?::VARCHAR[]))", [ids])
        finally:
            con.close()

    def _sync_chroma(self) -> tuple[int, int]:
        """Make the vectors match the rows (after an interrupted write): upsert missing, delete stale."""
        coll = self._coll()
        have = set(coll.get(include=[])["ids"]) if coll.count() else set()
        recs = {r.id: r for r in self.records()}
        missing = [recs[i] for i in recs if i not in have]
        stale = [i for i in have if i not in recs]
        if missing:
            vecs = self.embedder.encode_array([kernel_text(r.before_source, r.op_family, r.bottleneck)
                                               for r in missing])
            coll.upsert(ids=[r.id for r in missing], embeddings=vecs, metadatas=[_meta(r) for r in missing])
        if stale:
            coll.delete(ids=stale)
        return len(missing), len(stale)

    # -- vector search ---------------------------------------------------------------------------
    def search(self, text: str, methods: Sequence[str], *, per_method: int = 2,
               min_similarity: float = 0.0) -> dict[str, list[LearnedHit]]:
        """The learned records of each method nearest to ``text`` (a :func:`kernel_text`), best first."""
        if not self.exists() or not methods:
            return {}
        recs = {r.id: r for r in self.records()}
        if not recs:
            return {}
        coll = self._coll()
        if coll.count() != len(recs):
            with self._locked():
                self._sync_chroma()
        vec = self.embedder.encode_array([text])
        out: dict[str, list[LearnedHit]] = {}
        for method in dict.fromkeys(methods):
            n = sum(1 for r in recs.values() if r.as_method == method)
            if not n:
                continue
            res = coll.query(query_embeddings=vec, n_results=min(per_method, n), where={"method": method},
                             include=["distances"])
            hits = []
            for rid, dist in zip(res["ids"][0], res["distances"][0], strict=True):
                rec = recs.get(rid)
                sim = round(1.0 - float(dist), 4)
                if rec is None or sim < min_similarity:
                    continue
                hits.append(LearnedHit(id=rid, method=method, similarity=sim, speedup=rec.speedup,
                                       after_vs_eager=rec.after_vs_eager, op_family=rec.op_family,
                                       bottleneck=rec.bottleneck, hardware=rec.hardware, protocol=rec.protocol,
                                       run_id=rec.run_id, task_name=rec.task_name, reverified=rec.reverified))
            if hits:
                out[method] = hits
        return out

    # -- exchange --------------------------------------------------------------------------------
    def export(self, folder: Path) -> int:
        """Write every record (sources included) to ``<folder>/learned/records.jsonl``; returns how many."""
        recs = self.records()
        if not recs:
            return 0
        path = Path(folder) / EXPORT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(r.model_dump_json() + "\n" for r in recs), encoding="utf-8")
        return len(recs)

    def import_(self, folder: Path) -> list[str]:
        """Add the records of an export (``<folder>/learned/records.jsonl``); a bad line changes nothing."""
        path = Path(folder) / EXPORT_FILE
        if not path.is_file():
            return []
        recs: list[LearnedRecord] = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                recs.append(LearnedRecord.model_validate_json(line))
            except ValueError as exc:
                first = str(exc).splitlines()[0]
                raise KernelskillError(f"{path}:{number}: not a learned record ({first})") from exc
        return self.add(recs)


def proposal_yaml(run_id: str, records: Sequence[LearnedRecord], cases: dict[str, Any], *,
                  drafts: Sequence[dict[str, Any]] = (), joins: dict[str, list[str]] | None = None,
                  mappings: Sequence[str] = ()) -> str:
    """Reviewable YAML proposing what ``records`` suggest for the curated KB, never applied by itself: for
    each case the run's query matched where a method that paid is not first, the case again with that
    method moved to the front and ``version`` raised (so ``kb add`` replaces the KB's case); the new method
    ``drafts`` (Method items) with, for each case in ``joins`` (case id -> draft ids), the case again with
    the drafts first. ``mappings`` are the lines stating which run methods are KB methods. ``cases`` maps a
    case id to the KB's current :class:`~kernelskill.kb.schema.Case`."""
    import yaml

    joins = joins or {}
    head = [f"# Proposals learned from run {run_id} ({len(records)} verified improvement(s)).",
            "# Nothing here is in the knowledge base. Review each item against the evidence below, delete what",
            "# it does not support, then add the rest with:  kernelskill kb add <this file>",
            "# (a case with a higher version replaces the KB's case of the same id).",
            "# Evidence (kernelskill kb learn):"]
    head += [f"#   - {r.line()}" for r in records]
    if mappings:
        head.append("# Run methods that are KB methods (by guidance and code similarity):")
        head += [f"#   - {line}" for line in mappings]
    if drafts:
        head.append(f"# New method drafts: {', '.join(d['id'] for d in drafts)} (worked examples: the run's parent "
                    "and child)")
    proposed: list[dict[str, Any]] = []
    notes: list[str] = []
    for case_id in dict.fromkeys([*(r.case for r in records if r.case), *joins]):
        case = cases.get(case_id)
        paid = sorted((r for r in records if r.case == case_id), key=lambda r: -r.speedup)
        if case is None:
            notes.append(f"# case {case_id}: not in this KB; no change proposed")
            continue
        new = [d for d in joins.get(case_id, []) if d not in case.methods]
        best = next((r for r in paid if r.as_method in case.methods), None)
        if best is None and not new:
            named = ", ".join(f"{r.method} (= {r.kb_method})" if r.kb_method else r.method for r in paid)
            notes.append(f"# case {case_id}: {named} not among its methods; no change proposed")
            continue
        if not new and best is not None and case.methods[0] == best.as_method:
            notes.append(f"# case {case_id}: {best.as_method} is already first; no change proposed")
            continue
        front = [*new, *([best.as_method] if best is not None else [])]
        item = case.model_dump(mode="json", exclude_defaults=True)
        item["version"] = case.version + 1
        item["methods"] = [*front, *[m for m in case.methods if m not in front]]
        said = [f"{best.as_method} measured {best.speedup:.2f}x over its parent on {best.hardware} ({best.protocol})"
                ] if best is not None else []
        said += [f"the new method {d} was learned on a kernel this case matched" for d in new]
        item["rationale"] = f"{case.rationale.rstrip()} Learned from run {run_id}: {'; '.join(said)}."
        proposed.append(item)
    data: dict[str, Any] = {}
    if drafts:
        data["methods"] = list(drafts)
    if proposed:
        data["cases"] = proposed
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110) if data else ""
    return "\n".join(head + notes) + "\n" + body


def _meta(r: LearnedRecord) -> dict[str, Any]:
    meta: dict[str, Any] = {"method": r.as_method, "run_id": r.run_id, "speedup": float(r.speedup)}
    if r.op_family:
        meta["op_family"] = r.op_family
    if r.bottleneck:
        meta["bottleneck"] = r.bottleneck
    return meta


__all__ = ["LearnedHit", "LearnedRecord", "LearnedStore", "kernel_text", "proposal_yaml", "record_id", "source_hash"]
