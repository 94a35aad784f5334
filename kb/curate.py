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

A name in the user's folder belongs to one source: ``kb add`` records where each placed file came from
(``<kb_dir>/placed.json``) and refuses a file (or worked example) whose name is taken by a file of another
source with other content, naming both, instead of replacing it; adding the same file again (edited) is an
update. The check runs under the writer lock, so two adds at once are decided one after the other.

No rebuild drops a user's object silently: before a build from the sources, objects the KB holds whose skill
file was deleted by hand (outside the bundled folder) are written back to ``recovered-<time>.yaml`` in the
user's folder (with a warning); removing an object is ``kb remove`` (:func:`remove_objects`).

``kb doctor`` compares the KB's objects with what the skill files define: objects whose file is gone
(a KB written by an older version that died after its switch) are written back to a
``recovered-<time>.yaml`` by ``--repair``, differences are re-ingested from the files. It also reports
temporary files a killed writer left in the user's folder (``.NAME.*.tmp``); ``--repair`` deletes them.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
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
    Location,
    SkillSet,
    canonical_json,
    iter_yaml_files,
    load_report,
    raise_first,
)
from kernelskill.kb.schema import SECTIONS
from kernelskill.kb.skill_edit import text_without, without
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
PLACED_FILE = "placed.json"  # <kb_dir>/placed.json: name in the user's folder -> the source it came from


def _source_groups(settings: Any, bundled: Path | None, exclude: list[Path] | None = None) -> list[list[Path]]:
    """``[[bundled], [user files...]]``; ``exclude`` drops user files/folders about to be replaced."""
    groups: list[list[Path]] = []
    root = base_skills_dir(settings, bundled)
    if root.is_dir():
        groups.append([root])
    user = Path(settings.user_skills_dir).resolve()  # canonical: locations do not depend on the spelling
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
        skills, report = _compose_keeping(settings, store, bundled=bundled)
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
def _placed(settings: Any, store: KBStore, copies: list[tuple[Path | None, Path]],
            target_hash: str) -> Iterator[None]:
    """Place ``(source, dest)`` copies (files or folders; a ``None`` source deletes ``dest``) in the user's
    folder under a journal; the body runs the ingest. On an error, or when the process dies, :func:`recover_pending` keeps the files if the
    KB switched to ``target_hash`` and otherwise restores what was there."""
    kb_dir = Path(settings.kb_dir)
    pending = kb_dir / PENDING_DIR
    shutil.rmtree(pending, ignore_errors=True)
    pending.mkdir(parents=True)
    entries: list[dict[str, Any]] = []
    for n, (src, dest) in enumerate(copies):
        if src is not None and src.resolve() == dest.resolve():
            continue
        backup: str | None = None
        if dest.exists():
            saved = pending / str(n)
            if dest.is_dir():
                shutil.copytree(dest, saved, symlinks=True)
            else:
                shutil.copy2(dest, saved)
            backup = str(saved)
        entries.append({"dest": str(dest), "backup": backup, "src": None if src is None else str(src)})
    _write_json_atomic(kb_dir / PENDING_FILE, {"target_hash": target_hash, "entries": entries})
    try:
        for entry in entries:
            src, dest = Path(entry["src"] or entry["dest"]), Path(entry["dest"])
            if entry["src"] is None:
                _remove(dest)
            elif src.is_dir():
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


# --------------------------------------------------------------------------------------------------
# no silent loss: objects whose file was deleted by hand; names taken by another source


def _vanished(settings: Any, store: KBStore, sources: SkillSet, bundled: Path | None,
              keep_out: set[str]) -> list[str]:
    """Ids the KB holds that no source defines any more because their skill file is gone (deleted by hand),
    outside the bundled folders (an upgrade that drops a bundled object drops it on purpose)."""
    if not store.exists():
        return []
    kept = store.skillset()
    bases = {base_skills_dir(settings, bundled).resolve(), base_skills_dir(settings).resolve(),
             bundled_skills_dir().resolve()}
    defined = {o.id for _, o in sources.objects()}
    user = Path(settings.user_skills_dir).resolve()
    out = []
    for _, obj in kept.objects():
        if obj.id in defined or obj.id in kept.generated or obj.id in keep_out or obj.id not in kept.locations:
            continue
        file = Path(kept.locations[obj.id].file)
        if any(b == file or b in file.parents for b in bases):
            continue
        if file.is_absolute() and user in file.parents and file.exists():
            continue  # edited out of a file that is still there: the edit is the user's choice
        out.append(obj.id)
    return sorted(out)


def _compose_keeping(settings: Any, store: KBStore, *, bundled: Path | None = None, extra: list[Path] | None = None,
                     exclude: list[Path] | None = None, keep_out: set[str] | None = None
                     ) -> tuple[SkillSet, LintReport]:
    """:func:`compose`, after writing back to ``recovered-<time>.yaml`` every object of the KB whose skill
    file was deleted by hand (call with the writer lock held); ``keep_out`` are ids being removed."""
    skills, report = compose(settings, bundled=bundled, extra=extra, exclude=exclude)
    lost = _vanished(settings, store, skills, bundled, keep_out or set())
    if not lost:
        return skills, report
    path = _recover_orphans(settings, store, lost)
    log.warning("%d KB objects whose skill file was deleted (%s) were written back to %s; "
                "remove objects with 'kernelskill kb remove ID'", len(lost), ", ".join(lost[:8]), path)
    return compose(settings, bundled=bundled, extra=extra, exclude=exclude)


def _relocate(skills: SkillSet, moves: list[tuple[Path, Path]]) -> None:
    """Record the objects of each ``(source, copy)`` (a file, or a folder and everything under it) at their
    copy in the user's folder, where the KB keeps them (the source may be edited, moved or deleted later)."""
    pairs = [(src.resolve(), dest) for src, dest in moves]
    for oid, loc in list(skills.locations.items()):
        file = Path(loc.file).resolve()
        for src, dest in pairs:
            if file == src:
                skills.locations[oid] = Location(str(dest), loc.line)
            elif src in file.parents:
                skills.locations[oid] = Location(str(dest / file.relative_to(src)), loc.line)
            else:
                continue
            break


def _digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents)."""
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f"{f.relative_to(path).as_posix()}\0".encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    elif path.is_file():
        h.update(path.read_bytes())
    return h.hexdigest()


def _read_placed(settings: Any) -> dict[str, str]:
    path = Path(settings.kb_dir) / PLACED_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise KernelskillError(f"{path}: corrupt ({exc}); delete it to accept the files as they are") from exc
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _record_placed(settings: Any, copies: list[tuple[Path, Path]]) -> None:
    user = Path(settings.user_skills_dir).resolve()
    placed = _read_placed(settings)
    for src, dest in copies:
        placed[_rel_name(user, dest)] = str(src.resolve())
    _write_json_atomic(Path(settings.kb_dir) / PLACED_FILE, dict(sorted(placed.items())))


def _forget_placed(settings: Any, gone: list[Path]) -> None:
    """Drop the records of files no longer in the user's folder (their name is free again)."""
    placed = _read_placed(settings)
    user = Path(settings.user_skills_dir).resolve()
    names = {_rel_name(user, p) for p in gone}
    if names & placed.keys():
        _write_json_atomic(Path(settings.kb_dir) / PLACED_FILE,
                           {k: v for k, v in placed.items() if k not in names})


def _rel_name(user: Path, dest: Path) -> str:
    dest = dest.resolve()
    try:
        return dest.relative_to(user).as_posix()
    except ValueError:
        return str(dest)


def _check_names_free(settings: Any, copies: list[tuple[Path, Path]], verb: str) -> None:
    """Refuse (before anything is written) a copy whose destination already holds other content that came
    from another source: the file of another folder with the same name is never replaced silently."""
    user = Path(settings.user_skills_dir).resolve()
    placed = _read_placed(settings)
    for src, dest in copies:
        if not dest.exists() or src.resolve() == dest.resolve():
            continue
        name = _rel_name(user, dest)
        owner = placed.get(name)
        if owner == str(src.resolve()) or _digest(src) == _digest(dest):
            continue  # the same source again (an update), or the same content
        taken = f"by {owner}" if owner else "by a file already in the KB"
        raise KernelskillError(f"kb {verb}: {src}: the name {name!r} under {user} is taken {taken}, with other "
                               "content; rename the file (or remove the other one's objects with 'kernelskill "
                               "kb remove ID'); nothing was changed")


def add_files(settings: Any, files: list[Path], *, store: KBStore | None = None,
              bundled: Path | None = None) -> IngestReport:
    """Validate + lint ``files`` with the current sources, place copies in the user's folder and ingest,
    as one unit under the writer lock (see the module doc)."""
    files = [Path(f) for f in files]
    for f in files:
        if not f.is_file():
            raise KernelskillError(f"{f}: no such file")
    user = Path(settings.user_skills_dir).resolve()
    targets = [user / f.name for f in files]
    if len({t.name for t in targets}) != len(targets):
        raise KernelskillError("add: two files share a name; rename one")
    store = _store(settings, store)
    with store.writer():
        recover_pending(settings, store)
        # decided under the lock: a concurrent add of another file with the same name sees this one's file
        _check_names_free(settings, list(zip(files, targets, strict=True)), "add")
        skills, report = _compose_keeping(settings, store, bundled=bundled, extra=files, exclude=targets)
        _raise_lint(report)
        copies = list(zip(files, targets, strict=True))
        for f in files:
            copies.extend((src, user / rel) for src, rel in _example_files(skills, f))
        _check_names_free(settings, copies, "add")
        _relocate(skills, copies)
        for m in skills.methods:  # worked examples are copied to the same relative paths under the user's folder
            if m.example is not None and Path(skills.locations[m.id].file).parent == user:
                skills.example_roots[m.id] = user
        with _placed(settings, store, copies, skills.content_hash()):
            result = store.ingest(skills, check=False)
        _record_placed(settings, copies)
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
    target = Path(settings.user_skills_dir).resolve() / IMPORTED_DIR / folder.resolve().name
    store = _store(settings, store)
    with store.writer():
        recover_pending(settings, store)
        _check_names_free(settings, [(folder, target)], "import")
        skills, report = _compose_keeping(settings, store, bundled=bundled, extra=[folder], exclude=[target])
        _raise_lint(report)
        # An imported folder keeps its examples under <copy>/examples, which the loader resolves
        # relative to the copy (the YAML's own folder is tried as a root as well).
        _relocate(skills, [(folder, target)])
        for m in skills.methods:
            root = skills.example_roots.get(m.id)
            if root is not None and (root.resolve() == folder.resolve() or folder.resolve() in root.resolve().parents):
                skills.example_roots[m.id] = target / root.resolve().relative_to(folder.resolve())
        with _placed(settings, store, [(folder, target)], skills.content_hash()):
            result = store.ingest(skills, check=False)
        _record_placed(settings, [(folder, target)])
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
    n = 1
    while path.exists():  # a second recovery within the same second keeps the first one's file
        n += 1
        path = user / f"{RECOVERED_PREFIX}{stamp}-{n}.yaml"
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


def stray_temp_files(settings: Any) -> list[Path]:
    """Temporary files (or staging folders) a killed writer left in the user's skills folder: every
    writer names them ``.NAME.<random>.tmp`` and renames or deletes them before it lets go of the lock."""
    user = Path(settings.user_skills_dir)
    if not user.is_dir():
        return []
    found: list[Path] = []
    stack = [user]
    while stack:
        folder = stack.pop()
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    found.append(Path(entry.path))
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
    return sorted(found)


def _compare_with_sources(settings: Any, store: KBStore, report: DriftReport) -> None:
    report.sources_checked = True
    report.stray_temp_files = [str(p) for p in stray_temp_files(settings)]
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
                      and not report.unapplied and report.sources_error is None and not report.stray_temp_files)
    if repair and not report.in_sync:
        with store.writer():
            if recover_pending(settings, store) is not None:
                # the files of the interrupted write were kept or put back: what is orphaned is known only now
                fresh = DriftReport(**report.model_dump(exclude={"orphans", "unapplied"}))
                _compare_with_sources(settings, store, fresh)
                report.orphans = fresh.orphans
            for tmp in stray_temp_files(settings):  # under the lock: no writer of ours is alive to own them
                _remove(tmp)
            if report.orphans:
                report.recovered_file = str(_recover_orphans(settings, store, report.orphans))
            if report.sources_error is None:
                init_kb(settings, store=store)
            store.doctor(repair=True)
        report.repaired = report.sources_error is None
    return report


# --------------------------------------------------------------------------------------------------
# remove: an object and its entry in its skills file, as one unit


def remove_objects(settings: Any, ids: list[str], *, store: KBStore | None = None) -> dict[str, Any]:
    """Remove KB objects and their entries in the user's skill files as one unit under the writer lock:
    the new set is validated and linted first (a case left naming a removed method is refused, naming it),
    then the edited files are placed under the journal and the KB switches; on any error both stay as they
    were. Objects of the bundled (or ``--skills``) folder are refused: change one by adding a file that
    defines its id with a higher ``version``. An object the KB holds whose file is already gone is dropped."""
    wanted = list(dict.fromkeys(ids))
    store = _store(settings, store)
    with store.writer():
        recover_pending(settings, store)
        sources, _ = compose(settings)
        kept = store.skillset() if store.exists() else SkillSet()
        bases = [base_skills_dir(settings).resolve(), bundled_skills_dir().resolve()]
        edits: dict[Path, set[str]] = {}
        files_gone: list[str] = []
        for oid in wanted:
            if oid in sources.generated or oid in kept.generated:
                method = oid.removeprefix("doc.")
                raise KernelskillError(f"kb remove: {oid!r} is the doc generated from method {method!r}; "
                                       f"remove the method (kernelskill kb remove {method})")
            if sources.by_id(oid) is None:
                if kept.by_id(oid) is None:
                    raise KernelskillError(f"kb remove: no KB object with id {oid!r} (see 'kernelskill kb list')")
                files_gone.append(oid)  # its file was deleted: the KB alone holds it
                continue
            file = Path(sources.locations[oid].file).resolve()
            if any(b == file or b in file.parents for b in bases):
                raise KernelskillError(f"kb remove: {oid!r} is bundled ({file}); bundled objects are not removed "
                                       "(to change one, 'kb add' a file defining the same id with a higher "
                                       "version); nothing was changed")
            edits.setdefault(file, set()).add(oid)
        target = without(sources, set(wanted))
        report = lint(target)
        if report.errors:
            first = report.errors[0]
            raise KernelskillError(f"kb remove: without {', '.join(wanted)} the KB would not lint: "
                                   f"{first.file}:{first.line}: {first.message}; nothing was changed")
        staging = Path(settings.kb_dir) / f".remove-{uuid.uuid4().hex}"
        staging.mkdir(parents=True)
        try:
            copies: list[tuple[Path | None, Path]] = []
            changed: dict[str, str] = {}
            for n, (file, gone) in enumerate(sorted(edits.items())):
                text = text_without(file.read_text(encoding="utf-8"), gone)
                if text is None:
                    copies.append((None, file))
                    changed[str(file)] = "deleted"
                else:
                    staged = staging / f"{n}.yaml"
                    staged.write_text(text, encoding="utf-8")
                    copies.append((staged, file))
                    changed[str(file)] = "edited"
            with _placed(settings, store, copies, target.content_hash()):
                skills, _ = _compose_keeping(settings, store, keep_out=set(wanted))
                if skills.content_hash() != target.content_hash():
                    raise KernelskillError("kb remove: the edited skill files do not load as the KB without "
                                           f"{', '.join(wanted)} (a file whose layout the editor does not "
                                           "know?); nothing was changed")
                result = store.ingest(skills, check=False)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _forget_placed(settings, [Path(f) for f, what in changed.items() if what == "deleted"])
        _record_fingerprint(settings, None)
    return {"removed": wanted, "files": changed, "only_in_kb": files_gone} | result.model_dump()
