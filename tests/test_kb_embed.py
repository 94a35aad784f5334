"""The embedder: the torch-free numpy path matches sentence-transformers; the cache avoids re-encoding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelskill.kb.embed import DIM, Embedder, bundled_model_dir, numpy_supported

TEXTS = [
    "Coalesced global memory access: adjacent threads read adjacent addresses.",
    "x",
    "Tensor-core MMA for a compute-bound GEMM with fp16 inputs and fp32 accumulation. " * 12,  # > 256 tokens
    "warp shuffle reduction, then one atomicAdd per block",
    "",
]


def test_numpy_backend_matches_sentence_transformers() -> None:
    from sentence_transformers import SentenceTransformer

    fast = Embedder(None, backend="numpy").encode_array(TEXTS)
    model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
    ref = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert fast.shape == ref.shape == (len(TEXTS), DIM)
    cos = (fast * ref).sum(1) / (np.linalg.norm(fast, axis=1) * np.linalg.norm(ref, axis=1))
    assert cos.min() > 0.999, cos
    torch_backend = Embedder(None, backend="torch").encode_array(TEXTS[:2])
    assert np.allclose(torch_backend, ref[:2], atol=1e-5)


def test_bundled_model_uses_numpy_backend_by_default() -> None:
    assert numpy_supported(bundled_model_dir())
    assert Embedder(None).backend_name == "numpy"


def test_cache_persists_and_skips_the_model(tmp_path: Path) -> None:
    first = Embedder(None, cache_dir=tmp_path)
    v1 = first.encode(["cached text", "another", "cached text"])
    assert first.encoded == 2 and len(first.cache) == 2
    second = Embedder(None, cache_dir=tmp_path)  # a new process would see the same file
    v2 = second.encode(["another", "cached text"])
    assert second.encoded == 0
    assert v2 == [v1[1], v1[0]]
    assert (tmp_path / "embed_cache.sqlite").is_file()


def test_import_and_query_encode_do_not_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import kernelskill.kb.embed as e\n"
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules\n"
        f"v = e.Embedder.get(None, cache_dir={str(tmp_path)!r}).encode(['hello'])\n"
        "assert len(v[0]) == 384 and 'torch' not in sys.modules, 'torch imported'\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_unknown_backend_is_a_clear_error() -> None:
    from kernelskill.errors import KernelskillError

    with pytest.raises(KernelskillError, match="embed.backend"):
        Embedder(None, backend="tpu")
