"""An exact copy of the SkillDoc vectors beside the DuckDB file, so that a query searches without Chroma.

Importing ``chromadb`` and opening its client takes 1.3-2.2 s on a 2-core machine, far more than the
search itself on a KB of a few thousand docs. The vectors Chroma holds are the embedder's vectors of
``title + text`` (L2-normalised float32), so an ingest also writes them, in ``id`` order, to
``<kb>/vectors/<content hash>.vec``: ``MAGIC``, the length of a JSON header (8 bytes, little-endian), the
header (content hash, embedding model fingerprint, dimension, count, doc ids, their methods and their
bottleneck / tier / structure tags), zero padding to a multiple of 4 bytes, then the ``count x dim``
float32 matrix (little-endian, row ``i`` = ``ids[i]``).

The file is written to a temporary name and renamed, and a reader uses it only when its content hash is
the one ``CURRENT`` names and its model is the embedder's, so it always describes exactly the DuckDB
version being read. Search is exact: cosine distance ``1 - v . q`` over the docs that pass the filters,
the same distance Chroma's cosine space reports. In a process that has not imported numpy, up to
``PURE_PYTHON_ROWS`` candidate docs it runs in plain Python over a memory map (importing numpy costs
0.1-0.25 s on a loaded 2-core machine, more than the search); otherwise in numpy. Chroma stays the store of record (``kb doctor`` checks it, and KBs
larger than ``exact_search_max_docs`` still search it).

Importing this module does not import numpy.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import struct
import sys
from collections.abc import Sequence
from operator import mul
from pathlib import Path
from typing import Any

from kernelskill.kb.version_files import writing

log = logging.getLogger(__name__)

MIRROR_DIR = "vectors"
MAGIC = b"KSDOCVEC1\n"
DEFAULT_MAX_DOCS = 50_000  # numpy scans 50k x 384 float32 in a few ms; beyond it Chroma's index pays
PURE_PYTHON_ROWS = 2_000  # up to this many candidate docs, no numpy (about 10 us per 384-float dot)


def _numpy_loaded() -> bool:
    return "numpy" in sys.modules


def mirror_path(kb_dir: Path, content_hash: str) -> Path:
    return Path(kb_dir) / MIRROR_DIR / f"{content_hash}.vec"


def write_mirror(kb_dir: Path, content_hash: str, model_key: str, ids: Sequence[str], methods: Sequence[str],
                 tags: Sequence[tuple[list[str], list[str], list[int]]], vectors: Any) -> Path:
    """Write the mirror of one KB version atomically and delete the mirrors of other versions."""
    import numpy as np

    matrix = np.ascontiguousarray(vectors, dtype="<f4")
    count, dim = (matrix.shape[0], matrix.shape[1]) if matrix.ndim == 2 else (0, 0)
    if count != len(ids) or len(ids) != len(methods) or len(ids) != len(tags):
        raise ValueError(f"doc vectors: {count} vectors for {len(ids)} ids")
    header = json.dumps({"content_hash": content_hash, "model": model_key, "dim": dim, "count": count,
                         "ids": list(ids), "methods": list(methods), "tags": [list(t) for t in tags]}).encode()
    pad = (-(len(MAGIC) + 8 + len(header))) % 4
    folder = Path(kb_dir) / MIRROR_DIR
    folder.mkdir(parents=True, exist_ok=True)
    final = mirror_path(kb_dir, content_hash)
    with writing(final) as tmp, tmp.open("wb") as fh:
        fh.write(MAGIC + struct.pack("<Q", len(header)) + header + b"\0" * pad)
        fh.write(matrix.tobytes())
        fh.flush()
        os.fsync(fh.fileno())
    return final


def query_vector(embedder: Any, text: str) -> Any:
    """The embedder's vector of ``text``: from its cache as a list of floats when it was encoded before
    (no numpy, no model), else encoded now (a numpy array)."""
    vec = embedder.cached_vector(text)
    return vec if vec is not None else embedder.encode_array([text])[0]


class DocVectors:
    """One KB version's doc vectors (a read-only memory map), searched exactly."""

    def __init__(self, buf: Any, offset: int, info: dict[str, Any]) -> None:
        self._buf = buf
        self._offset = offset
        self.content_hash = str(info.get("content_hash"))
        self.model = str(info.get("model"))
        self.dim = int(info.get("dim", 0))
        self.ids: list[str] = list(info.get("ids") or [])
        self.methods: list[str] = list(info.get("methods") or [])
        self._tags: list[Any] = list(info.get("tags") or [])
        self._matrix: Any = None

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def load(cls, kb_dir: Path, content_hash: str, model_key: str) -> DocVectors | None:
        """The mirror of ``content_hash`` for ``model_key``, or None (absent, other model, unreadable)."""
        path = mirror_path(kb_dir, content_hash)
        try:
            with path.open("rb") as fh:
                if fh.read(len(MAGIC)) != MAGIC:
                    raise ValueError("not a doc vectors file")
                size = struct.unpack("<Q", fh.read(8))[0]
                info = json.loads(fh.read(size))
                offset = len(MAGIC) + 8 + size + (-(len(MAGIC) + 8 + size)) % 4
                total = os.fstat(fh.fileno()).st_size
                buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if total else b""
        except FileNotFoundError:
            return None
        except (OSError, ValueError, struct.error) as exc:
            log.warning("doc vectors %s unreadable (%s); searching Chroma", path, exc)
            return None
        mirror = cls(buf, offset, info)
        if mirror.content_hash != content_hash or mirror.model != model_key:
            return None
        n = len(mirror)
        if not (n == len(mirror.methods) == len(mirror._tags) == int(info.get("count", -1))
                and total == offset + 4 * n * mirror.dim):
            log.warning("doc vectors %s are inconsistent; searching Chroma", path)
            return None
        return mirror

    def matrix(self) -> Any:
        """The vectors as a ``(n, dim)`` float32 numpy view of the map (imports numpy)."""
        if self._matrix is None:
            import numpy as np

            self._matrix = np.frombuffer(self._buf, dtype="<f4", count=len(self) * self.dim,
                                         offset=self._offset).reshape(len(self), self.dim)
        return self._matrix

    def _rows(self, methods: Sequence[str] | None, bottleneck: str | None, tier: str | None,
              structure: int | None) -> list[int]:
        wanted = set(methods) if methods is not None else None
        checks = [(c, v) for c, v in ((0, bottleneck), (1, tier), (2, structure)) if v is not None]
        rows = []
        for i, method in enumerate(self.methods):
            if wanted is not None and method not in wanted:
                continue
            tags = self._tags[i]
            if all(not tags[c] or v in tags[c] for c, v in checks):
                rows.append(i)
        return rows

    def search(self, query: Sequence[float], k: int, methods: Sequence[str] | None = None, *,
               bottleneck: str | None = None, tier: str | None = None,
               structure: int | None = None) -> list[tuple[str, float]]:
        """``(id, cosine distance)`` of the ``k`` nearest docs passing the filters, nearest first (ties by
        id). A doc without bottleneck / tier / structure tags passes any value of that filter. ``query``
        is the L2-normalised query vector (a list of floats or a numpy array)."""
        if k <= 0 or len(self) == 0:
            return []
        rows = self._rows(methods, bottleneck, tier, structure)
        if not rows:
            return []
        if (len(rows) <= PURE_PYTHON_ROWS and isinstance(query, list) and sys.byteorder == "little"
                and not _numpy_loaded()):
            dim = self.dim
            flat = memoryview(self._buf)[self._offset:self._offset + 4 * len(self) * dim].cast("f")
            scored = [(1.0 - sum(map(mul, query, flat[r * dim:(r + 1) * dim])), r) for r in rows]
        else:
            import numpy as np

            idx = np.array(rows, dtype=np.int64)
            q = np.asarray(query, dtype=np.float32).reshape(-1)
            dist = np.float32(1.0) - self.matrix()[idx] @ q
            if idx.size > k:  # only the k nearest need sorting
                keep = np.argpartition(dist, k - 1)[:k]
                idx, dist = idx[keep], dist[keep]
            scored = list(zip(dist.tolist(), idx.tolist(), strict=True))
        scored.sort()  # nearest first; equal distances in row (= id) order
        return [(self.ids[r], float(d)) for d, r in scored[:k]]
