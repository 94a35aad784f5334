"""An exact copy of the SkillDoc vectors beside the DuckDB file, so that a query searches without Chroma.

Importing ``chromadb`` and opening its client takes 1.3-2.2 s on a 2-core machine, far more than the
search itself on a KB of a few thousand docs. The vectors Chroma holds are the embedder's vectors of
``title + text`` (L2-normalised float32), so an ingest also writes them, in ``id`` order, to
``<kb>/vectors/<content hash>.npz``:

- ``vectors``: ``(n, dim)`` float32, one row per doc;
- ``ids`` / ``methods``: the doc ids (sorted) and their methods;
- ``info``: JSON with the content hash, the embedding model's fingerprint and each doc's bottleneck,
  tier and structure tags (read only when a search filters on them).

The file is written to a temporary name and renamed, and a reader uses it only when its content hash is
the one ``CURRENT`` names and its model is the embedder's, so it always describes exactly the DuckDB
version being read. Search is exact: cosine distance ``1 - v . q`` over the docs that pass the filters,
the same distance Chroma's cosine space reports. Chroma stays the store of record (``kb doctor`` checks
it, and KBs larger than ``exact_search_max_docs`` still search it).

Importing this module does not import numpy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MIRROR_DIR = "vectors"
DEFAULT_MAX_DOCS = 50_000  # numpy scans 50k x 384 float32 in a few ms; beyond it Chroma's index pays


def mirror_path(kb_dir: Path, content_hash: str) -> Path:
    return Path(kb_dir) / MIRROR_DIR / f"{content_hash}.npz"


def write_mirror(kb_dir: Path, content_hash: str, model_key: str, ids: Sequence[str], methods: Sequence[str],
                 tags: Sequence[tuple[list[str], list[str], list[int]]], vectors: Any) -> Path:
    """Write the mirror of one KB version atomically and delete the mirrors of other versions."""
    import numpy as np

    folder = Path(kb_dir) / MIRROR_DIR
    folder.mkdir(parents=True, exist_ok=True)
    final = mirror_path(kb_dir, content_hash)
    tmp = folder / f".{final.name}.{uuid.uuid4().hex}.tmp"
    info = {"content_hash": content_hash, "model": model_key, "tags": [list(t) for t in tags]}
    try:
        with tmp.open("wb") as fh:
            np.savez(fh, vectors=np.ascontiguousarray(vectors, dtype=np.float32),
                     ids=np.array(list(ids), dtype=str), methods=np.array(list(methods), dtype=str),
                     info=np.array(json.dumps(info)))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    for old in folder.glob("*.npz"):
        if old != final:
            with contextlib.suppress(OSError):
                old.unlink()
    return final


class DocVectors:
    """One KB version's doc vectors, searched exactly with numpy."""

    def __init__(self, vectors: Any, ids: Any, methods: Any, info: dict[str, Any]) -> None:
        self.vectors = vectors
        self.ids = ids
        self.methods = methods
        self.content_hash = str(info.get("content_hash"))
        self.model = str(info.get("model"))
        self._tags: list[Any] = info.get("tags") or []

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @classmethod
    def load(cls, kb_dir: Path, content_hash: str, model_key: str) -> DocVectors | None:
        """The mirror of ``content_hash`` for ``model_key``, or None (absent, other model, unreadable)."""
        path = mirror_path(kb_dir, content_hash)
        if not path.is_file():
            return None
        import numpy as np

        try:
            with np.load(path, allow_pickle=False) as z:
                info = json.loads(str(z["info"]))
                mirror = cls(z["vectors"], z["ids"], z["methods"], info)
        except (OSError, ValueError, KeyError) as exc:
            log.warning("doc vectors %s unreadable (%s); searching Chroma", path, exc)
            return None
        if mirror.content_hash != content_hash or mirror.model != model_key:
            return None
        if not (len(mirror.ids) == len(mirror.methods) == len(mirror) == len(mirror._tags)):
            log.warning("doc vectors %s are inconsistent; searching Chroma", path)
            return None
        return mirror

    def _tag_mask(self, column: int, value: Any) -> Any:
        import numpy as np

        return np.fromiter((not t[column] or value in t[column] for t in self._tags), dtype=bool, count=len(self))

    def search(self, query: Any, k: int, methods: Sequence[str] | None = None, *, bottleneck: str | None = None,
               tier: str | None = None, structure: int | None = None) -> list[tuple[str, float]]:
        """``(id, cosine distance)`` of the ``k`` nearest docs passing the filters, nearest first (ties by
        id). A doc without bottleneck / tier / structure tags passes any value of that filter."""
        import numpy as np

        if k <= 0 or len(self) == 0:
            return []
        mask = np.ones(len(self), dtype=bool)
        if methods is not None:
            mask &= np.isin(self.methods, np.array(list(methods), dtype=str))
        for column, value in ((0, bottleneck), (1, tier), (2, structure)):
            if value is not None:
                mask &= self._tag_mask(column, value)
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        dist = np.float32(1.0) - self.vectors[rows] @ q
        if rows.size > k:
            keep = np.argpartition(dist, k - 1)[:k]
            rows, dist = rows[keep], dist[keep]
        order = np.lexsort((rows, dist))  # nearest first; equal distances in id order
        return [(str(self.ids[rows[i]]), float(dist[i])) for i in order]
