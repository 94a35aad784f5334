"""The fast paths of a cold query give the answers of the slow ones: the exact search over the doc
vectors' mirror, in plain Python and in numpy, returns what Chroma returns (same ids, same order, same
distances), on the bundled KB through a real store (DuckDB file, Chroma collection, bundled MiniLM); and
a query in a new process imports neither chromadb nor torch (nor numpy, for a query text seen before).
The read copy an ingest writes answers every read a query makes (and the search hits' text) as the store
does, so a query in a new process, first-seen situation or not, imports neither DuckDB nor the store and
prints what the store's answer prints. Without a read copy (a KB written before it existed), the KB reads
kept on disk are the store's reads, for the DuckDB version that gave them only."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelskill.config import load_settings
from kernelskill.kb import doc_vectors
from kernelskill.kb.doc_vectors import MIRROR_DIR, DocVectors, mirror_path
from kernelskill.kb.read_copy import COPY_DIR, ReadCopy, copy_path
from kernelskill.kb.store import KBStore

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
MANIFEST = json.loads((EX / "manifest.json").read_text())["examples"]

QUERIES = [
    "bottleneck: memory bandwidth. headroom tier high. structure: streaming elementwise. kernel: scalar 4-byte "
    "accesses",
    "bottleneck: compute throughput. kernel: naive GEMM dot product per thread from global memory, matrix "
    "multiply that tensor cores could run",
    "reduction or scan over rows, softmax with exp, warp shuffle",
    "several kernel launches per forward, CUDA graph capturable launches, epilogue fusion after a library GEMM",
    "uncoalesced strided access in a transpose",
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    h = tmp_path_factory.mktemp("speed_home")
    from kernelskill.kb.home import open_store

    open_store(load_settings(home=h)).close()  # builds the KB from the bundled skills
    return h


@pytest.fixture(scope="module")
def stores(home: Path):
    settings = load_settings(home=home)
    exact = KBStore.open(settings.kb_dir, read_only=True, embed_settings=settings.embed)
    chroma_only = settings.embed.model_copy(update={"exact_search_max_docs": 0})
    chroma = KBStore.open(settings.kb_dir, read_only=True, embed_settings=chroma_only)
    yield exact, chroma
    exact.close()
    chroma.close()


def _filters(store: KBStore) -> list[dict]:
    methods = [m.id for m in store.methods()]
    bottlenecks = [b.id for b in store.bottlenecks()]
    tiers = [t.id for t in store.tiers()]
    return [
        {},
        {"methods": methods[:3]},
        {"methods": methods[::2]},
        {"methods": [methods[-1]]},
        {"bottleneck": bottlenecks[0]},
        {"tier": tiers[-1], "structure": 0},
        {"methods": methods[1::2], "bottleneck": bottlenecks[1], "tier": tiers[0], "structure": 3},
    ]


@pytest.mark.parametrize("pure_rows", [doc_vectors.PURE_PYTHON_ROWS, 0], ids=["python", "numpy"])
def test_exact_search_returns_what_chroma_returns(stores, pure_rows: int, monkeypatch) -> None:
    monkeypatch.setattr(doc_vectors, "PURE_PYTHON_ROWS", pure_rows)
    monkeypatch.setattr(doc_vectors, "_numpy_loaded", lambda: False)  # this process has numpy already
    exact, chroma = stores
    assert exact.doc_vectors() is not None, "an ingest writes the mirror"
    assert chroma.doc_vectors() is None, "exact_search_max_docs = 0 turns the mirror off"
    n_docs = exact.counts()["docs"]
    compared = 0
    for text in QUERIES:
        for flt in _filters(exact):
            for k in (1, 5, n_docs):
                got = exact.search_docs(text, k=k, **flt)
                want = chroma.search_docs(text, k=k, **flt)
                assert [h.id for h in got] == [h.id for h in want], (text, flt, k)
                for g, w in zip(got, want, strict=True):
                    assert abs(g.distance - w.distance) <= 1e-5, (g.id, g.distance, w.distance)
                    assert (g.method, g.title, g.text, g.metadata) == (w.method, w.title, w.text, w.metadata)
                compared += len(got)
    assert compared > 100
    assert exact._collection is None and exact._client is None, "the exact search never opened Chroma"


def test_mirror_belongs_to_one_content_hash_and_model(home: Path, stores) -> None:
    exact, _ = stores
    content = exact.content_hash()
    kb_dir = exact.kb_dir
    assert [p.name for p in (kb_dir / MIRROR_DIR).iterdir()] == [mirror_path(kb_dir, content).name]
    mirror = DocVectors.load(kb_dir, content, exact.embedder.model_key)
    assert mirror is not None and len(mirror) == exact.counts()["docs"]
    assert list(mirror.ids) == sorted(d.id for d in exact.docs())
    assert DocVectors.load(kb_dir, content, "another-model:0") is None
    assert DocVectors.load(kb_dir, "0" * 64, exact.embedder.model_key) is None
    small = load_settings(home=home).embed.model_copy(update={"exact_search_max_docs": len(mirror) - 1})
    with KBStore.open(kb_dir, read_only=True, embed_settings=small) as over:
        assert over.doc_vectors() is None, "a KB above the limit searches Chroma"


def test_missing_mirror_falls_back_to_chroma_and_ingest_or_doctor_writes_it_back(tmp_path: Path) -> None:
    from kernelskill.kb.curate import bundled_skills_dir
    from kernelskill.kb.loader import load_skills

    settings = load_settings(home=tmp_path / "h")
    skills = load_skills([bundled_skills_dir()])
    with KBStore.open(settings.kb_dir, embed_settings=settings.embed) as store:
        store.ingest(skills)
        path = mirror_path(store.kb_dir, store.content_hash())
        with_mirror = store.search_docs(QUERIES[0], k=4)
        path.unlink()
        store._vectors = None
        assert store.doc_vectors() is None
        without = store.search_docs(QUERIES[0], k=4)
        assert [h.id for h in without] == [h.id for h in with_mirror]
        assert not store.ingest(skills).changed and path.is_file(), "an unchanged ingest writes a missing mirror"
        path.unlink()
        report = store.doctor(repair=True)
        assert report.in_sync and path.is_file(), "kb doctor --repair writes a missing mirror"


def _cold(home: Path, body: str, modules: tuple[str, ...] = ("chromadb", "torch", "sentence_transformers",
                                                             "numpy")) -> dict:
    script = ("import json, sys\nimport kernelskill\nfrom kernelskill.config import load_settings\n"
              f"settings = load_settings(home={str(home)!r})\n{body}\n"
              f"print(json.dumps({{m: m in sys.modules for m in {modules!r}}}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_cold_query_imports_neither_chromadb_nor_torch(home: Path) -> None:
    kb_dir = load_settings(home=home).kb_dir
    for e in MANIFEST[:2]:
        for profile in (EX / e["profile"], None):
            body = (f"r = kernelskill.query({str(EX / e['kernel'])!r}, profile={str(profile) if profile else None!r}, "
                    "settings=settings)\nassert r.permitted and any(p.docs for p in r.permitted)")
            for seen in (False, True):  # a new query text (MiniLM encodes it), then the same text again
                (kb_dir / "search_cache.sqlite").unlink(missing_ok=True)  # the search itself must run
                loaded = _cold(home, body, ("chromadb", "torch", "sentence_transformers", "numpy", "tokenizers",
                                            "threadpoolctl", "duckdb"))
                # a new text: numpy, with OpenBLAS on one thread and the plain-Python WordPiece
                assert loaded == {"chromadb": False, "torch": False, "sentence_transformers": False,
                                  "numpy": not seen, "tokenizers": False, "threadpoolctl": False,
                                  "duckdb": False}, (e["kernel"], profile, seen)


def test_a_cold_cli_query_imports_neither_chromadb_nor_torch(home: Path) -> None:
    e = MANIFEST[2]
    args = ["query", str(EX / e["kernel"]), "--profile", str(EX / e["profile"]), "--json", "--home", str(home)]
    body = ("from kernelskill.cli import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n")
    loaded = _cold(home, body)
    assert (loaded["chromadb"], loaded["torch"], loaded["sentence_transformers"]) == (False, False, False)


def _reads(kb) -> dict:
    """Every read a query can make, on ``kb`` (a store or a DiskReadsKB)."""
    out: dict = {"fields": kb.fields(), "predicates": kb.predicates(), "tiers": kb.tiers(),
                 "bottlenecks": kb.bottlenecks(), "vetoes": kb.vetoes(), "counts": kb.counts(),
                 "methods": kb.methods(), "none": kb.methods([])}
    ids = [m.id for m in out["methods"]]
    out["some"] = kb.methods(ids[::3] + ["no_such_method"] + ids[:2])
    out["roots"] = [kb.example_root(i) for i in ids] + [kb.example_root("no_such_method")]
    for b in [b.id for b in out["bottlenecks"]] + [None, "no_such_bottleneck"]:
        for t in [t.id for t in out["tiers"]] + [None, "no_such_tier"]:
            for st in (None, 0, 1, 2, 3, 4, 7):
                for fb in (False, True):
                    out[("cases", b, t, st, fb)] = kb.cases_for(b, t, st, fallback=fb)
    return out


def _no_store() -> None:
    raise AssertionError("the store was opened")


@contextlib.contextmanager
def _without_read_copy(kb_dir: Path) -> Iterator[None]:
    """The KB as one written before the read copy existed (the copy's folder moved aside meanwhile)."""
    folder, aside = kb_dir / COPY_DIR, kb_dir.parent / "reads.aside"
    shutil.move(str(folder), str(aside))
    try:
        yield
    finally:
        shutil.move(str(aside), str(folder))


def test_read_copy_answers_every_read_and_search_as_the_store(home: Path, stores) -> None:
    from kernelskill.retrieval.kb_reads import DiskReadsKB

    exact, _ = stores
    settings = load_settings(home=home)
    content = exact.content_hash()
    assert [p.name for p in (exact.kb_dir / COPY_DIR).iterdir()] == [copy_path(exact.kb_dir, content).name]
    copy = ReadCopy.open(exact.kb_dir, content)
    assert copy is not None and ReadCopy.open(exact.kb_dir, "0" * 64) is None
    want = _reads(exact)
    got = _reads(copy)
    assert got == want
    assert [type(m) for m in got["methods"]] == [type(m) for m in want["methods"]]
    assert sum(1 for k in got if isinstance(k, tuple) and got[k]) > 50, "many non-empty case lists compared"
    copy.close()

    reader = DiskReadsKB(settings, _no_store)  # reads and searches without DuckDB, Chroma or the store
    assert _reads(reader) == want
    assert reader.doc_vectors() is not None
    n_docs = exact.counts()["docs"]
    compared = 0
    for text in QUERIES:
        for flt in _filters(exact) + [{"methods": []}]:
            for k in (0, 1, 5, n_docs):
                got_hits = reader.search_docs(text, k=k, **flt)
                want_hits = exact.search_docs(text, k=k, **flt)
                assert [(h.id, h.method, h.title, h.text, h.distance, h.metadata) for h in got_hits] == \
                    [(h.id, h.method, h.title, h.text, h.distance, h.metadata) for h in want_hits], (text, flt, k)
                compared += len(got_hits)
    assert compared > 100
    assert reader._store is None
    reader.close()


def test_a_read_copy_written_after_a_reader_looked_is_used(home: Path, stores) -> None:
    from kernelskill.retrieval.kb_reads import DiskReadsKB

    exact, _ = stores
    settings = load_settings(home=home)
    reader = DiskReadsKB(settings, lambda: exact)
    with _without_read_copy(settings.kb_dir):  # as between an ingest's switch of CURRENT and its copy
        assert reader.tiers() == exact.tiers()
        assert reader._store is exact
    reader._store = None
    reader._open_store = _no_store
    assert reader.vetoes() == exact.vetoes(), "answered by the copy, found on the next read"
    reader.close()


def test_read_copy_is_written_by_an_ingest_and_written_back_when_missing(tmp_path: Path) -> None:
    from kernelskill.kb.curate import bundled_skills_dir
    from kernelskill.kb.loader import load_skills

    settings = load_settings(home=tmp_path / "h")
    skills = load_skills([bundled_skills_dir()])
    with KBStore.open(settings.kb_dir, embed_settings=settings.embed) as store:
        store.ingest(skills)
        path = copy_path(store.kb_dir, store.content_hash())
        assert path.is_file()
        path.unlink()
        assert not store.ingest(skills).changed and path.is_file(), "an unchanged ingest writes a missing copy"
        path.unlink()
        assert store.doctor(repair=True).in_sync and path.is_file(), "kb doctor --repair writes a missing copy"
        stale = path.with_name("f" * 64 + ".sqlite")
        shutil.copy(path, stale)
        assert ReadCopy.open(store.kb_dir, "f" * 64) is None, "a copy names the version it was written for"
        path.unlink()
        store.ingest(skills)
        assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "other versions' copies go"


def test_kb_reads_from_disk_are_the_stores_for_its_version_only(home: Path) -> None:
    settings = load_settings(home=home)
    with _without_read_copy(settings.kb_dir):
        _check_kb_reads_from_disk(home)


def _check_kb_reads_from_disk(home: Path) -> None:
    from kernelskill.kb.sources import CURRENT
    from kernelskill.retrieval.kb_reads import DiskReadsKB
    from kernelskill.retrieval.search_cache import CACHE_NAME

    settings = load_settings(home=home)
    (settings.kb_dir / CACHE_NAME).unlink(missing_ok=True)
    with KBStore.open(settings.kb_dir, read_only=True, embed_settings=settings.embed) as store:
        want = _reads(store)
        first = DiskReadsKB(settings, lambda: KBStore.open(settings.kb_dir, read_only=True,
                                                           embed_settings=settings.embed))
        assert _reads(first) == want  # answered by the store, and kept
        assert first._store is not None
        first.flush()
        again = DiskReadsKB(settings, _no_store)
        got = _reads(again)  # a new reader: every answer from disk, the store never opened
        assert got == want
        assert [type(m) for m in got["methods"]] == [type(m) for m in want["methods"]]
        assert any(got[k] for k in got if isinstance(k, tuple)), "some cases were compared"
        assert again.content_hash() == store.content_hash()
        assert again.embedder is store.embedder, "the same shared embedder, without the store"
        first.close()
        again.close()

    pointer = settings.kb_dir / CURRENT
    saved = pointer.read_text()
    try:  # another version: what was kept for the previous one is not used, and is dropped when it answers
        pointer.write_text(json.dumps({**json.loads(saved), "content_hash": "f" * 64}))
        other = DiskReadsKB(settings, _no_store)
        with pytest.raises(AssertionError, match="the store was opened"):
            other.tiers()
        with KBStore.open(settings.kb_dir, read_only=True, embed_settings=settings.embed) as store:
            other = DiskReadsKB(settings, lambda: store)
            assert other.tiers() == want["tiers"]
            other.flush()
            db = other._conn()
            assert db is not None
            versions = {r[0] for r in db.execute("SELECT DISTINCT version FROM reads")}
            assert versions == {json.dumps([json.loads(saved)["db"], "f" * 64])}
            assert other.vetoes() == want["vetoes"]  # read for the "f" version, which is gone before the flush
            pointer.write_text(saved)
            other.flush()
            assert db.execute("SELECT count(*) FROM reads WHERE key LIKE '%vetoes%'").fetchone()[0] == 0
            other._db.close()
    finally:
        pointer.write_text(saved)


def test_a_stale_kb_is_rebuilt_before_any_read_from_disk(home: Path) -> None:
    from kernelskill.kb.sources import FINGERPRINT_FILE, kb_is_current
    from kernelskill.retrieval.api import _disk_reads_store

    settings = load_settings(home=home)
    record = settings.kb_dir / FINGERPRINT_FILE
    saved = record.read_text()
    try:
        record.write_text("0" * 64)  # as if the skills had changed since the KB was built
        assert not kb_is_current(settings)
        reader = _disk_reads_store(settings)
        assert reader._store is not None, "opened (and rebuilt) at once, as open_store does"
        assert kb_is_current(settings)
        reader.close()
    finally:
        record.write_text(saved)


@pytest.mark.parametrize("static", [False, True], ids=["profile", "static-only"])
def test_a_cold_query_without_duckdb_prints_what_the_store_prints(home: Path, static: bool) -> None:
    """First-seen and repeated situations, with the read copy: no DuckDB, no store; without it (a KB
    written before the copy existed) the store answers a first-seen situation: the same answer."""
    e = MANIFEST[0]
    kb_dir = load_settings(home=home).kb_dir
    out = kb_dir.parent / "out.json"
    args = ["--home", str(home), "--json", "query", str(EX / e["kernel"])] + ([] if static else
                                                                             ["--profile", str(EX / e["profile"])])
    body = ("import contextlib\nfrom kernelskill.cli import main\n"
            f"with open({str(out)!r}, 'w') as fh, contextlib.redirect_stdout(fh):\n"
            f"    try:\n        main({args!r})\n    except SystemExit as exc:\n        assert not exc.code, exc.code\n")
    answers = []
    for copy, cached in ((False, False), (False, True), (True, False), (True, True)):
        if not cached:
            (kb_dir / "search_cache.sqlite").unlink(missing_ok=True)
        with contextlib.nullcontext() if copy else _without_read_copy(kb_dir):
            loaded = _cold(home, body, ("duckdb", "kernelskill.kb.store", "chromadb"))
        from_store = not copy and not cached
        assert loaded == {"duckdb": from_store, "kernelskill.kb.store": from_store, "chromadb": False}, (copy, cached)
        answer = json.loads(out.read_text())
        answer.pop("timings_ms")
        answers.append(answer)
    assert all(a == answers[0] for a in answers[1:])


def test_rule_files_parse_the_same_with_libyaml() -> None:
    import yaml

    from kernelskill import yaml_load

    files = sorted((ROOT / "retrieval").glob("*.yaml"))
    assert len(files) >= 3
    for path in files:
        text = path.read_text()
        assert yaml_load.safe_load(text) == yaml.safe_load(text), path.name


def test_sources_fingerprint_lists_the_files_rglob_lists(tmp_path: Path) -> None:
    import hashlib
    from types import SimpleNamespace

    from kernelskill.kb.sources import bundled_skills_dir, sources_fingerprint

    def by_rglob(settings) -> str:  # the plain statement of the fingerprint
        digest = hashlib.sha256()
        for root in (bundled_skills_dir(), Path(settings.user_skills_dir)):
            digest.update(f"[{root}]".encode())
            if root.is_dir():
                for p in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
                    st = p.stat()
                    digest.update(f"{p.relative_to(root).as_posix()}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        return digest.hexdigest()

    user = tmp_path / "user"
    for rel in ("a-b.yaml", "a/b.yaml", "a/c/d.yaml", ".hidden.yaml", "z.yaml", "a/__pycache__/x.pyc", "a b/é.yaml"):
        (user / rel).parent.mkdir(parents=True, exist_ok=True)
        (user / rel).write_text(rel)
    (user / "link").symlink_to(user / "a", target_is_directory=True)
    settings = SimpleNamespace(kb_dir=tmp_path / "kb", user_skills_dir=user)
    assert sources_fingerprint(settings) == by_rglob(settings)
    (user / "a" / "b.yaml").write_text("changed, longer")
    assert sources_fingerprint(settings) == by_rglob(settings)
    assert sources_fingerprint(SimpleNamespace(kb_dir=tmp_path / "kb", user_skills_dir=tmp_path / "none")) == \
        by_rglob(SimpleNamespace(user_skills_dir=tmp_path / "none"))
