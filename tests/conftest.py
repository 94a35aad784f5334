"""Shared fixtures. GPU tests are marked ``gpu`` and skipped when CUDA is absent."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty kernelskill home folder for one test."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("KERNELSKILL_HOME", str(path))
    return path
