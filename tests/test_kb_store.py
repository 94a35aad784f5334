"""The store with a real DuckDB file, a real Chroma collection and the real bundled embedder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kernelskill.config import load_settings
from kernelskill.errors import KernelskillError
from kernelskill.kb import curate
from kernelskill.kb.embed import Embedder
from kernelskill.kb.loader import load_skills
from kernelskill.kb.store import CURRENT, KBStore

SMALL = Path(__file__).parent / "data" / "skills_small"


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return Embedder.get(None)


@pytest.fixture
def kb(tmp_path: Path, embedder: Embedder) -> KBStore:
    store = KBStore.open(tmp_path / "kb", embedder=embedder)
    store.ingest(load_skills([SMALL]))
    return store


def _snapshot(store: KBStore) -> dict:
    stats = store.stats()
    return {"stats": stats, "current": (store.kb_dir / CURRENT).read_text(),
            "docs": sorted(store._chroma_docs(store._coll()).items())}


def test_reads_filter_in_sql(kb: KBStore) -> None:
    assert [c.id for c in kb.cases_for("memory_bandwidth", "tier.high", 0)] == ["case.mem_pointwise", "case.mem_any"]
    assert [c.id for c in kb.cases_for("memory_bandwidth", "tier.low", 0)] == ["case.mem_pointwise"]
    assert [c.id for c in kb.cases_for("memory_bandwidth", "tier.high", 3)] == ["case.mem_any"]
    assert [c.id for c in kb.cases_for("memory_bandwidth", None, None)] == []  # unknown tier: only tier-less
    assert [c.id for c in kb.cases_for("compute_throughput", "tier.low", 2)] == ["case.compute_gemm"]
    assert [c.id for c in kb.cases_for(None, None, None, fallback=True)] == ["case.fallback"]
    assert [m.id for m in kb.methods(["tensor_core_mma", "coalesced_access", "missing"])] == \
        ["tensor_core_mma", "coalesced_access"]
    assert [t.name for t in kb.tiers()] == ["H", "M", "L"]
    assert [b.id for b in kb.bottlenecks()] == ["memory_bandwidth", "compute_throughput"]
    assert len(kb.fields()) == 9 and len(kb.predicates()) == 6 and len(kb.vetoes()) == 2
    assert kb.get("veto.no_library").patterns == ["cublas[A-Za-z]*\\("]
    assert kb.get("nope") is None
    assert kb.location("case.mem_pointwise").endswith("cases.yaml:2")
    assert {r["id"] for r in kb.list_objects("method", "memory_bandwidth")} == {"coalesced_access",
                                                                             "vectorized_access_16b"}


def test_search_ranks_and_filters_by_method(kb: KBStore) -> None:
    hits = kb.search_docs("transpose with strided writes through a shared memory tile", k=3)
    assert hits[0].id == "doc.case_study.transpose"
    assert hits[0].distance <= hits[1].distance <= hits[2].distance
    only = kb.search_docs("matrix multiply", k=5, methods=["tensor_core_mma", "cublas_gemm"])
    assert {h.method for h in only} == {"tensor_core_mma", "cublas_gemm"}
    tagged = kb.search_docs("memory", k=10, bottleneck="compute_throughput")
    assert tagged and all("compute_throughput" in h.metadata.get("bottlenecks", []) for h in tagged)
    assert kb.search_docs("x", methods=[]) == []


def test_second_ingest_changes_nothing(kb: KBStore) -> None:
    before = _snapshot(kb)
    files = sorted(p.name for p in (kb.kb_dir / "db").iterdir())
    report = kb.ingest(load_skills([SMALL]))
    assert not report.changed and report.upserted == 0 and report.encoded == 0
    assert _snapshot(kb) == before
    assert sorted(p.name for p in (kb.kb_dir / "db").iterdir()) == files


def test_changed_content_upserts_only_changed_docs_and_deletes_stale(kb: KBStore, tmp_path: Path) -> None:
    dest = tmp_path / "s2"
    shutil.copytree(SMALL, dest)
    text = (dest / "methods.yaml").read_text()
    text = text.replace("Tensor cores multiply", "x").replace("Use tensor cores for matrix products.",
                                                               "Run matrix products on tensor cores.")
    text = text[:text.index("docs:")]  # drop the case study doc
    (dest / "methods.yaml").write_text(text)
    report = kb.ingest(load_skills([dest]))
    assert report.changed and report.upserted == 1 and report.deleted == 1
    assert kb.get("doc.case_study.transpose") is None
    assert kb.doctor().in_sync


def test_bad_batch_writes_nothing(kb: KBStore, tmp_path: Path) -> None:
    before = _snapshot(kb)
    dest = tmp_path / "s2"
    shutil.copytree(SMALL, dest)
    (dest / "bad.yaml").write_text("cases:\n  - id: case.bad\n    title: t\n    bottleneck: memory_bandwidth\n"
                                   "    methods: [not_a_method]\n    rationale: r\n")
    with pytest.raises(KernelskillError, match=r"bad.yaml:2: case.bad: method 'not_a_method' is not defined"):
        kb.ingest(load_skills([dest]))
    assert _snapshot(kb) == before


def test_crash_before_the_switch_keeps_the_old_version(kb: KBStore, tmp_path: Path, monkeypatch) -> None:
    before = _snapshot(kb)
    dest = tmp_path / "s2"
    shutil.copytree(SMALL, dest)
    (dest / "rules.yaml").write_text((dest / "rules.yaml").read_text().replace(">= 80", ">= 85"))

    def boom(*args, **kwargs):
        raise OSError("disk full")

    files = sorted(p.name for p in (kb.kb_dir / "db").iterdir())
    monkeypatch.setattr("kernelskill.kb.store._write_atomic", boom)  # the new file is complete; the switch fails
    with pytest.raises(OSError):
        kb.ingest(load_skills([dest]))
    assert _snapshot(kb) == before
    assert kb.get("dram_bound").expr.endswith(">= 80")
    assert sorted(p.name for p in (kb.kb_dir / "db").iterdir()) == files  # no half-written leftovers


def test_kill_during_chroma_sync_is_detected_and_repaired(kb: KBStore, tmp_path: Path) -> None:
    dest = tmp_path / "s2"
    shutil.copytree(SMALL, dest)
    text = (dest / "methods.yaml").read_text()
    for old in ("Make the threads of a warp", "Move 16 bytes", "Use tensor cores", "Let the vendor"):
        text = text.replace(old, f"Changed - {old}")
    (dest / "methods.yaml").write_text(text)
    old_hash = kb.content_hash()
    kb.close()
    # A real process is killed (os._exit) after the first Chroma upsert batch of the new version.
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from kernelskill.kb import store as st
        from kernelskill.kb.loader import load_skills
        real = st.KBStore._sync_chroma
        def dying(self, target_hash):
            coll = self._coll(create=True)
            real_upsert = coll.upsert
            def upsert(**kw):
                n = len(kw["ids"]) // 2
                real_upsert(**{{k: v[:n] for k, v in kw.items()}})
                os._exit(137)
            coll.upsert = upsert
            return real(self, target_hash)
        st.KBStore._sync_chroma = dying
        s = st.KBStore.open(Path({str(kb.kb_dir)!r}))
        s.ingest(load_skills([Path({str(dest)!r})]))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 137, proc.stderr
    store = KBStore.open(kb.kb_dir, embedder=kb.embedder)
    new_hash = store.content_hash()
    assert new_hash != old_hash  # DuckDB switched atomically to the complete new version
    assert store.predicates() and store.search_docs("coalesced access", k=2)  # still usable
    drift = store.doctor()
    assert not drift.in_sync and drift.chroma_hash == old_hash and drift.mismatched
    fixed = store.doctor(repair=True)
    assert fixed.repaired
    again = store.doctor()
    assert again.in_sync and again.chroma_hash == new_hash and not again.mismatched
    assert not store.ingest(load_skills([dest])).changed


def test_drift_by_hand_is_detected_and_repaired(kb: KBStore) -> None:
    coll = kb._coll()
    coll.delete(ids=["doc.tensor_core_mma"])
    coll.upsert(ids=["doc.ghost"], embeddings=[[0.1] * 384], metadatas=[{"method": "x", "doc_hash": "h"}],
                documents=["ghost"])
    drift = kb.doctor()
    assert not drift.in_sync and drift.missing == ["doc.tensor_core_mma"] and drift.stale == ["doc.ghost"]
    assert "doc.ghost" not in {h.id for h in kb.search_docs("ghost", k=6)}  # hits come through DuckDB
    assert kb.doctor(repair=True).repaired
    assert kb.doctor().in_sync and kb._coll().count() == 5


def test_readers_keep_working_while_a_writer_ingests(kb: KBStore, tmp_path: Path, embedder: Embedder) -> None:
    reader = KBStore.open(kb.kb_dir, read_only=True, embedder=embedder)
    variants = []
    for i in range(3):
        d = tmp_path / f"v{i}"
        shutil.copytree(SMALL, d)
        (d / "rules.yaml").write_text((d / "rules.yaml").read_text().replace(">= 80", f">= {81 + i}"))
        variants.append(d)
    errors: list[BaseException] = []
    done = threading.Event()

    def read_loop() -> None:
        try:
            while not done.is_set():
                assert len(reader.cases_for("memory_bandwidth", "tier.high", 0)) == 2
                assert reader.stats()["counts"]["docs"] == 5
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=read_loop)
    t.start()
    try:
        for d in variants:
            kb.ingest(load_skills([d]))
    finally:
        done.set()
        t.join()
    assert not errors, errors
    assert reader.get("dram_bound").expr.endswith(">= 83")  # the reader follows CURRENT
    assert len(list((kb.kb_dir / "db").glob("kb-*.duckdb"))) == 2  # current + previous kept


def test_read_only_open_of_missing_kb_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KernelskillError, match="kb init"):
        KBStore.open(tmp_path / "nothing", read_only=True)


def test_export_then_import_into_empty_home_same_hash(tmp_path: Path, embedder: Embedder) -> None:
    s1 = load_settings(home=tmp_path / "h1", environ={}, cwd=tmp_path)
    user = s1.user_skills_dir
    user.mkdir(parents=True)
    (user / "mine.yaml").write_text(
        "docs:\n  - id: doc.mine\n    method: tensor_core_mma\n    title: My note\n    kind: pitfall\n"
        "    text: Check the accumulator type before blaming the tolerance.\n")
    store1 = KBStore.open(s1.kb_dir, embedder=embedder)
    curate.init_kb(s1, store=store1, bundled=SMALL)
    assert store1.get("doc.mine") is not None
    out = tmp_path / "export"
    result = curate.export_kb(store1, out)
    assert (out / "examples" / "coalesced_access" / "after.py").is_file()
    assert not any("doc.coalesced_access" in Path(f).read_text() for f in result["files"])  # generated: left out
    assert load_skills([out]).content_hash() == store1.content_hash()

    s2 = load_settings(home=tmp_path / "h2", environ={}, cwd=tmp_path)
    store2 = KBStore.open(s2.kb_dir, embedder=embedder)
    report = curate.import_dir(s2, out, store=store2, bundled=SMALL)
    assert report.changed and store2.content_hash() == store1.content_hash()
    # the imported copy survives a re-init and changes nothing
    assert (s2.user_skills_dir / "imported" / "export" / "methods.yaml").is_file()
    assert not curate.init_kb(s2, store=store2).changed
    assert json.loads((s2.kb_dir / "sources.json").read_text())["bundled"] == str(SMALL.resolve())
