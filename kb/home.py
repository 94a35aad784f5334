"""Open the knowledge base of a kernelskill home: build it when missing, rebuild it when its skills
changed, repair Chroma drift. The one entry point readers (query, CLI, MCP) use."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelskillError
from kernelskill.kb.curate import init_kb
from kernelskill.kb.sources import CURRENT, kb_is_stale
from kernelskill.kb.store import KBStore

log = logging.getLogger(__name__)


def open_store(settings: Any, *, read_only: bool = False, bundled: Path | None = None) -> KBStore:
    """Open ``settings.kb_dir``; build it from the bundled skills plus the user's skills when empty, and
    repair Chroma drift left by an interrupted ingest."""
    store = KBStore.open(settings.kb_dir, read_only=read_only and (settings.kb_dir / CURRENT).is_file(),
                         embed_settings=settings.embed)
    if not store.exists():
        init_kb(settings, store=store, bundled=bundled)
    elif bundled is None and kb_is_stale(settings):
        # the skills it was built from changed since (an upgrade, a hand edit): rebuild, which writes
        # nothing when the content is the same; a broken source keeps the KB as it is
        log.warning("KB at %s is older than its skills folders; rebuilding", settings.kb_dir)
        try:
            init_kb(settings, bundled=bundled)
        except (KernelskillError, OSError) as exc:  # a broken source, or a home this user cannot write
            log.warning("KB not rebuilt, answering from the previous one: %s", exc)
        store = KBStore.open(settings.kb_dir, read_only=read_only, embed_settings=settings.embed)
    elif not store.read_only and store.drifted():
        log.warning("KB at %s: Chroma does not match DuckDB; repairing", settings.kb_dir)
        store.doctor(repair=True)
    return store
