"""Curation workflows over the store: init, add, import, export, lint of the configured sources.

The KB's content is always rebuilt from its sources: the bundled ``kb/skills/`` plus the user's skills
folder (``settings.user_skills_dir``). ``add`` and ``import`` validate the new files together with those
sources, ingest the result, and only then copy the files into the user's folder, so an error leaves the
KB and the folder exactly as they were, and accepted files survive a re-init.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kernelskill.errors import KernelskillError
from kernelskill.kb.lint import LintReport, lint
from kernelskill.kb.loader import (
    EXAMPLES_DIR,
    SkillSet,
    iter_yaml_files,
    load_report,
    raise_first,
)
from kernelskill.kb.schema import SECTIONS
from kernelskill.kb.store import IngestReport, KBStore

log = logging.getLogger(__name__)

IMPORTED_DIR = "imported"
SOURCES_FILE = "sources.json"
FINGERPRINT_FILE = "sources.fingerprint"


def bundled_skills_dir() -> Path:
    return Path(__file__).resolve().parent / "skills"


def base_skills_dir(settings: Any, bundled: Path | None = None) -> Path:
    """The base skills folder of a home: ``bundled`` if given, else the one ``kb init --skills`` recorded,
    else the skills shipped with the package."""
    if bundled is not None:
        return Path(bundled).resolve()
    recorded = Path(settings.kb_dir) / SOURCES_FILE
    if recorded.is_file():
        try:
            return Path(json.loads(recorded.read_text())["bundled"])
        except (ValueError, KeyError) as exc:
            raise KernelskillError(f"{recorded}: corrupt ({exc})") from exc
    return bundled_skills_dir()


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


def sources_fingerprint(settings: Any, bundled: Path | None = None) -> str:
    """A cheap fingerprint (names, sizes, mtimes) of every file the KB is built from: when it changes
    (an upgrade brought new bundled skills, a file was edited by hand) the KB is rebuilt on open."""
    digest = hashlib.sha256()
    for root in (base_skills_dir(settings, bundled), Path(settings.user_skills_dir)):
        digest.update(f"[{root}]".encode())
        if not root.is_dir():
            continue
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            st = path.stat()
            digest.update(f"{path.relative_to(root).as_posix()}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def kb_is_stale(settings: Any) -> bool:
    record = Path(settings.kb_dir) / FINGERPRINT_FILE
    return not record.is_file() or record.read_text().strip() != sources_fingerprint(settings)


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
    skills, report = compose(settings, bundled=bundled)
    _raise_lint(report)
    base = base_skills_dir(settings, bundled)
    if not skills.files:
        log.warning("no skills found (base folder %s)", base)
    result = _store(settings, store).ingest(skills, check=False)
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


def add_files(settings: Any, files: list[Path], *, store: KBStore | None = None,
              bundled: Path | None = None) -> IngestReport:
    """Validate + lint ``files`` with the current sources, ingest, then keep copies in the user's folder."""
    files = [Path(f) for f in files]
    for f in files:
        if not f.is_file():
            raise KernelskillError(f"{f}: no such file")
    user = Path(settings.user_skills_dir)
    targets = [user / f.name for f in files]
    if len({t.name for t in targets}) != len(targets):
        raise KernelskillError("add: two files share a name; rename one")
    skills, report = compose(settings, bundled=bundled, extra=files, exclude=targets)
    _raise_lint(report)
    result = _store(settings, store).ingest(skills, check=False)
    _record_base(settings, bundled)
    user.mkdir(parents=True, exist_ok=True)
    for f, target in zip(files, targets, strict=True):
        if f.resolve() != target.resolve():
            shutil.copy2(f, target)
        for src, rel in _example_files(skills, f):
            dest = user / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if src.resolve() != dest.resolve():
                shutil.copy2(src, dest)
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
    skills, report = compose(settings, bundled=bundled, extra=[folder], exclude=[target])
    _raise_lint(report)
    result = _store(settings, store).ingest(skills, check=False)
    _record_base(settings, bundled)
    if folder.resolve() != target.resolve():
        staging = Path(tempfile.mkdtemp(prefix=".import-", dir=target.parent.parent if target.parent.parent.exists()
                                        else None))
        shutil.copytree(folder, staging / "copy")
        # An imported folder keeps its examples under <copy>/examples, which the loader resolves
        # relative to the copy (the YAML's own folder is tried as a root as well).
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging / "copy"), str(target))
        shutil.rmtree(staging, ignore_errors=True)
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
