"""Every feature of every labelled corpus kernel (tests/corpus/labels.yaml), rules only."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernelskill.feature_rules import extract, extract_file
from kernelskill.kb.schema import FEATURE_NAMES

CORPUS = Path(__file__).parent / "corpus"
LABELS = yaml.safe_load((CORPUS / "labels.yaml").read_text())


def test_corpus_is_big_and_fully_labelled() -> None:
    files = sorted(p.name for p in CORPUS.iterdir() if p.suffix in (".py", ".cu"))
    assert len(files) >= 30
    assert sorted(LABELS) == files
    for name, labels in LABELS.items():
        assert set(labels) == set(FEATURE_NAMES), name
    assert sum(1 for f in files if f.endswith(".cu")) >= 2
    assert sum(1 for f in files if f.startswith("triton_")) >= 2


@pytest.mark.parametrize("name", sorted(LABELS))
def test_corpus_kernel_features(name: str) -> None:
    fs = extract_file(CORPUS / name)
    wrong = {f: (fs.values[f], want) for f, want in LABELS[name].items() if fs.values[f] != want}
    assert not wrong, f"{name}: (got, want) {wrong}"
    assert set(fs.values) == set(FEATURE_NAMES)


def test_same_source_same_features_every_time() -> None:
    text = (CORPUS / "register_blocked_gemm.py").read_text()
    first = extract(text, path="k.py")
    for _ in range(3):
        again = extract(text, path="k.py")
        assert again.model_dump() == first.model_dump()
    assert len(first.ruleset_version) == 16 and first.source_hash


def test_evidence_points_at_original_lines() -> None:
    path = CORPUS / "tiled_gemm_shared.py"
    lines = path.read_text().splitlines()
    fs = extract_file(path)
    for feature in ("has_shared_memory_tile", "has_k_loop", "has_bounds_check"):
        assert fs.evidence[feature], feature
        for ev in fs.evidence[feature]:
            assert lines[ev.line - 1].strip().startswith(ev.text[:20])
    assert any("__shared__" in e.text for e in fs.evidence["has_shared_memory_tile"])
    assert any("acc +=" in e.text for e in fs.evidence["has_k_loop"])
