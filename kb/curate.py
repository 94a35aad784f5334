"""Curation workflows over the store: init, add, import, export, lint of the configured sources.

The KB's content is always rebuilt from its sources: the bundled ``kb/skills/`` plus the user's skills
folder (``settings.user_skills_dir``). Every write (init, add, import, doctor --repair) holds the store's
writer lock from reading the sources to the end of the ingest, so two concurrent writers never build on
the same old state: the second one sees the first one's files.

``add`` and ``import`` are one unit over two places (the user's skills folder and the DuckDB switch):
the accepted files are placed in the folder *before* the switch, under a journal
(``<kb_dir>/pending-write.json``, with a backup of every file they replace). After the switch the journal
is dropped. If the process dies in between, the next writer (or ``kb doctor --repair``) reads the journal:
when the KB holds the journal's target content the files stay, otherwise they are put back as they were.
An error before the switch undoes the files at once. So the KB never serves an object whose file is not
in the folder, and a re-init never drops an accepted object.

``kb doctor`` compares the KB's objects with what the skill files define: objects whose file is gone
(a KB written by an older version that died after its switch) are written back to a
``recovered-<time>.yaml`` by ``--repair``, differences are re-ingested from the files.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kernelskill.errors import KernelskillError
from kernelskill.kb.lint import LintReport, lint
from kernelskill.kb.loader import (
    EXAMPLES_DIR,
    SkillSet,
    canonical_json,
    iter_yaml_files,
    load_report,
    raise_first,
)
from kernelskill.kb.schema import SECTIONS
from kernelskill.kb.sources import (  # noqa: F401 - re-exported: the sources of a KB live there, stdlib-only
    FINGERPRINT_FILE,
    SOURCES_FILE,
    base_skills_dir,
    bundled_skills_dir,
    kb_is_stale,
    sources_fingerprint,
)
from kernelskill.kb.store import DriftReport, IngestReport, KBStore

log = logging.getLogger(__name__)

IMPORTED_DIR = "imported"
PENDING_FILE = "pending-write.json"
PENDING_DIR = "pending"
RECOVERED_PREFIX = "recovered-"


def _source_groups(settings: Any, bundled: Path | None, exclude: list[Path] | None = None) -> list[list[Path]]:
    """``[[bundled], [user files...]]``; ``exclude`` drops user files/folders about to be replaced."""
    groups: list[list[Path]] = []
    root = base_skills_dir(settings, bundled)
    if root.is_dir():
        groups.append([root])
    user = Path(settings.user_skills_dir)
    if user.is_dir():
        skip = [p.resolve() for p in (exclude or [])]
        files = [f for f, _ in iter_yaml_files([user])
                 if not any(f.resolve() == s or s in f.resolve().parents for s in skip)]
        if files:
            groups.append(files)
    return groups


def _record_fingerprint(settings: Any, bundled: Path | None) -> None:
    record = Path(settings.kb_dir) / FINGERPRINT_FILE
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(sources_fingerprint(settings, bundled))


def compose(settings: Any, *, bundled: Path | None = None, extra: list[Path] | None = None,
            exclude: list[Path] | None = None) -> tuple[SkillSet, LintReport]:
    """Load + merge the sources (+ ``extra``) and lint them; raise on the first load error."""
    groups = _source_groups(settings, bundled, exclude)
    if extra:
        groups.append(list(extra))
    skills, issues = load_report(groups)
    raise_first(issues)
    return skills, lint(skills)


def _raise_lint(report: LintReport) -> None:
    if report.errors:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        raise KernelskillError(f"{first.file}:{first.line}: {first.message}{more}")


def _store(settings: Any, store: KBStore | None) -> KBStore:
    return store if store is not None else KBStore.open(settings.kb_dir, embed_settings=settings.embed)


def init_kb(settings: Any, *, store: KBStore | None = None, bundled: Path | None = None) -> IngestReport:
    """Build (or rebuild) the KB from the bundled skills plus the user's skills."""
    store = _store(settings, store)
    with store.writer():
        recover_pending(settings, store)
        skills, report = compose(settings, bundled=bundled)
        _raise_lint(report)
        base = base_skills_dir(settings, bundled)
        if not skills.files:
            log.warning("no skills found (base folder %s)", base)
        result = store.ingest(skills, check=False)
        _record_base(settings, bundled)
        _record_fingerprint(settings, bundled)
    return result


def _record_base(settings: Any, bundled: Path | None) -> None:
    if bundled is not None:
        record = Path(settings.kb_dir) / SOURCES_FILE
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"bundled": str(Path(bundled).resolve())}))


def _example_files(skills: SkillSet, yaml_file: Path) -> list[tuple[Path, str]]:
    """``(absolute source, path relative to the skills root)`` of the worked examples declared in a file."""
    out: list[tuple[Path, str]] = []
    for m in skills.methods:
        if m.example is None or Path(skills.locations[m.id].file).resolve() != yaml_file.resolve():
            continue
        root = skills.example_roots.get(m.id, yaml_file.parent)
        for rel in (m.example.task, m.example.before, m.example.after):
            out.append((root / rel, rel))
    return out


# --------------------------------------------------------------------------------------------------
# placing files in the user's folder together with the DuckDB switch


def _fsync_file(path: Path) -> None:
    with contextlib.suppress(OSError), path.open("rb") as fh:
        os.fsync(fh.fileno())


def _copy_file_atomic(src: Path, dest: Path) -> None:
    """``dest`` becomes a complete copy of ``src`` in one rename (never a half-written file)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.tmp")
    try:
        shutil.copy2(src, tmp)
        _fsync_file(tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _copy_dir_atomic(src: Path, dest: Path) -> None:
    """``dest`` (a folder) becomes a copy of ``src``; an old ``dest`` must already be backed up."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.tmp")
    try:
        shutil.copytree(src, staging)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def recover_pending(settings: Any, store: KBStore) -> str | None:
    """Finish or undo an add/import that died between placing its files and the end of its ingest
    (call with the writer lock held). Returns what was done (``kept`` / ``undone``) or None."""
    kb_dir = Path(settings.kb_dir)
    journal = kb_dir / PENDING_FILE
    pending = kb_dir / PENDING_DIR
    if not journal.is_file():
        if pending.exists():  # backups of a write that died before its journal was written
            shutil.rmtree(pending, ignore_errors=True)
        return None
    try:
        record = json.loads(journal.read_text())
        target, entries = record["target_hash"], record["entries"]
    except (ValueError, KeyError, TypeError) as exc:
        raise KernelskillError(f"{journal}: corrupt journal of an interrupted write ({exc}); "
                               "check the skills folder by hand, then delete it") from exc
    current = store.content_hash() if store.exists() else None
    if current == target:
        outcome = "kept"
    else:
        outcome = "undone"
        for entry in reversed(entries):
            dest = Path(entry["dest"])
            backup = entry.get("backup")
            if backup is not None and Path(backup).exists():
                _remove(dest)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(backup, dest)
            elif backup is None:
                _remove(dest)
    journal.unlink(missing_ok=True)
    shutil.rmtree(pending, ignore_errors=True)
    log.warning("an interrupted KB write was found: its files were %s (%d paths)", outcome, len(entries))
    return outcome


@contextlib.contextmanager
def _placed(settings: Any, store: KBStore, copies: list[tuple[Path, Path]], target_hash: str) -> Iterator[None]:
    """Place ``(source, dest)`` copies (files or folders) in the user's folder under a journal; the body
    runs the ingest. On an error, or when the process dies, :func:`recover_pending` keeps the files if the
    KB switched to ``target_hash`` and otherwise restores what was there."""
    kb_dir = Path(settings.kb_dir)
    pending = kb_dir / PENDING_DIR
    shutil.rmtree(pending, ignore_errors=True)
    pending.mkdir(parents=True)
    entries: list[dict[str, Any]] = []
    for n, (src, dest) in enumerate(copies):
        if src.resolve() == dest.resolve():
            continue
        backup: str | None = None
        if dest.exists():
            saved = pending / str(n)
            if dest.is_dir():
                shutil.copytree(dest, saved, symlinks=True)
            else:
                shutil.copy2(dest, saved)
            backup = str(saved)
        entries.append({"dest": str(dest), "backup": backup, "src": str(src)})
    _write_json_atomic(kb_dir / PENDING_FILE, {"target_hash": target_hash, "entries": entries})
    try:
        for entry in entries:
            src, dest = Path(entry["src"]), Path(entry["dest"])
            if src.is_dir():
                _copy_dir_atomic(src, dest)
            else:
                _copy_file_atomic(src, dest)
        yield
    except BaseException:
        recover_pending(settings, store)
        raise
    (kb_dir / PENDING_FILE).unlink()
    shutil.rmtree(pending, ignore_errors=True)


def _write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(data))
    _fsync_file(tmp)
    os.replace(tmp, path)


def add_files(settings: Any, files: list[Path], *, store: KBStore | None = None,
              bundled: Path | None = None) -> IngestReport:
    """Validate + lint ``files`` with the current sources, place copies in the user's folder and ingest,
    as one unit under the writer lock (see the module doc)."""
    files = [Path(f) for f in files]
    for f in files:
        if not f.is_file():
            raise KernelskillError(f"{f}: no such file")
    user = Path(settings.user_skills_dir)
    targets = [user / f.name for f in files]
    if len({t.name for t in targets}) != len(targets):
        raise KernelskillError("add: two files share a name; rename one")
    store = _store(settings, store)
    with store.writer():
        recover_pending(settings, store)
        skills, report = compose(settings, bundled=bundled, extra=files, exclude=targets)
        _raise_lint(report)
        copies = list(zip(files, targets, strict=True))
        for f in files:
            copies.extend((src, user / rel) for src, rel in _example_files(skills, f))
        with _placed(settings, store, copies, skills.content_hash()):
            result = store.ingest(skills, check=False)
        _record_base(settings, bundled)
        _record_fingerprint(settings, bundled)
    return result


def import_dir(settings: Any, folder: Path, *, store: KBStore | None = None,
               bundled: Path | None = None) -> IngestReport:
    """Merge a skills folder (e.g. one written by :func:`export_kb`) into the KB and keep a copy of it under
    ``<user skills>/imported/<name>/``. Objects identical to ones already present are kept once."""
    folder = Path(folder)
    if not folder.is_dir():
        raise KernelskillError(f"{folder}: not a folder")
    target = Path(settings.user_skills_dir) / IMPORTED_DIR / folder.resolve().name
    store = _store(settings, store)
    with store.writer():
        recover_pending(settings, store)
        skills, report = compose(settings, bundled=bundled, extra=[folder], exclude=[target])
        _raise_lint(report)
        # An imported folder keeps its examples under <copy>/examples, which the loader resolves
        # relative to the copy (the YAML's own folder is tried as a root as well).
        with _placed(settings, store, [(folder, target)], skills.content_hash()):
            result = store.ingest(skills, check=False)
        _record_base(settings, bundled)
        _record_fingerprint(settings, bundled)
    return result


def export_kb(store: KBStore, folder: Path) -> dict[str, Any]:
    """Write the KB as YAML (one file per section, generated docs left out) plus its worked examples;
    loading the folder again gives the same content hash."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    skills = store.skillset()
    written: list[str] = []
    for section in SECTIONS:
        items = [o for o in getattr(skills, section) if o.id not in skills.generated]
        if not items:
            continue
        data = {section: [o.model_dump(mode="json", exclude_defaults=True) for o in items]}
        path = folder / f"{section}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")
        written.append(str(path))
    copied = 0
    for m in skills.methods:
        if m.example is None:
            continue
        root = skills.example_roots.get(m.id)
        for rel in (m.example.task, m.example.before, m.example.after):
            src = (root / rel) if root is not None else None
            if src is None or not src.is_file():
                raise KernelskillError(f"export: worked example {rel} of {m.id} is missing (root {root})")
            dest = folder / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
            copied += 1
    if copied and not (folder / EXAMPLES_DIR).exists():
        log.debug("examples written outside %s/", EXAMPLES_DIR)
    return {"folder": str(folder), "files": written, "examples": copied, "content_hash": store.content_hash()}


def lint_sources(settings: Any, *, bundled: Path | None = None, extra: list[Path] | None = None) -> LintReport:
    """Lint the configured sources, reporting load problems as error findings instead of raising."""
    groups = _source_groups(settings, bundled)
    if extra:
        groups.append(list(extra))
    skills, issues = load_report(groups)
    return lint(skills, issues)


# --------------------------------------------------------------------------------------------------
# doctor: the KB's objects versus the skill files


def _recover_orphans(settings: Any, store: KBStore, orphans: list[str]) -> Path:
    """Write KB objects that no skill file holds any more into ``<user skills>/recovered-<time>.yaml``
    (with their worked examples when the KB's copy of them still exists)."""
    kept = store.skillset()
    user = Path(settings.user_skills_dir)
    user.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")
    path = user / f"{RECOVERED_PREFIX}{stamp}.yaml"
    wanted = set(orphans)
    data: dict[str, list[dict[str, Any]]] = {}
    for section, obj in kept.objects():
        if obj.id not in wanted:
            continue
        item = obj.model_dump(mode="json", exclude_defaults=True)
        example = getattr(obj, "example", None)
        if example is not None:
            root = kept.example_roots.get(obj.id)
            rels = (example.task, example.before, example.after)
            if root is not None and all((root / rel).is_file() for rel in rels):
                for rel in rels:
                    dest = user / rel
                    if not dest.exists():
                        _copy_file_atomic(root / rel, dest)
            else:
                log.warning("recovered %s without its worked example (files not found under %s)", obj.id, root)
                item.pop("example", None)
        data.setdefault(section, []).append(item)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")
    os.replace(tmp, path)
    return path


def _compare_with_sources(settings: Any, store: KBStore, report: DriftReport) -> None:
    report.sources_checked = True
    report.pending_write = (Path(settings.kb_dir) / PENDING_FILE).is_file()
    try:
        sources, issues = load_report(_source_groups(settings, None))
        raise_first(issues)
    except KernelskillError as exc:
        report.sources_error = str(exc)
        return
    if not store.exists():
        report.unapplied = sorted(o.id for _, o in sources.objects())
        return
    kept = store.skillset()
    base = base_skills_dir(settings)
    have = {o.id: canonical_json(o) for _, o in kept.objects()}
    want = {o.id: canonical_json(o) for _, o in sources.objects()}
    orphans: list[str] = []
    for oid in have:
        if oid in want or oid in kept.generated:
            continue
        file = Path(kept.locations[oid].file) if oid in kept.locations else None
        if file is not None and (file == base or base in file.parents):
            continue  # a bundled object removed by an upgrade: the next init drops it, as intended
        orphans.append(oid)
    report.orphans = sorted(orphans)
    report.unapplied = sorted({i for i in want if have.get(i) != want[i]}
                              | {i for i in have if i not in want and i not in orphans})


def doctor_kb(settings: Any, store: KBStore, *, repair: bool = False) -> DriftReport:
    """Check the KB against Chroma (vectors) and against the skill files (objects); with ``repair``
    finish an interrupted write, write orphaned objects back to a file, re-ingest from the files and
    re-sync Chroma. The report says what was found before the repair."""
    report = store.doctor(repair=False) if store.exists() else None
    if report is None:
        report = DriftReport(in_sync=False, duckdb_hash=None, chroma_hash=None, chroma_model=None,
                             embed_model="", duckdb_docs=0, chroma_docs=0, missing=[], stale=[], mismatched=[])
    _compare_with_sources(settings, store, report)
    report.in_sync = (report.in_sync and not report.pending_write and not report.orphans
                      and not report.unapplied and report.sources_error is None)
    if repair and not report.in_sync:
        with store.writer():
            recover_pending(settings, store)
            if report.orphans:
                report.recovered_file = str(_recover_orphans(settings, store, report.orphans))
            if report.sources_error is None:
                init_kb(settings, store=store)
            store.doctor(repair=True)
        report.repaired = report.sources_error is None
    return report
