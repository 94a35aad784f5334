"""Integrity of the blind generalization set (tests/data/blind) and a smoke run of its benchmark's core.

No thresholds: the agreement numbers are what ``benchmarks/kb_heldout.py`` reports (docs/blind_protocol.md).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

from kernelskill.config import load_settings
from kernelskill.kb.curate import bundled_skills_dir
from kernelskill.kb.home import open_store
from kernelskill.kb.loader import load_skills
from kernelskill.retrieval.profile import load_profile
from kernelskill.taskfile import read_task

ROOT = Path(__file__).resolve().parents[1]
BLIND = ROOT / "tests" / "data" / "blind"
LABELS = yaml.safe_load((BLIND / "labels.yaml").read_text())["kernels"]
IDS = sorted(p.name[: -len("_kernel.py")] for p in BLIND.glob("*_kernel.py"))


def _bench():
    spec = importlib.util.spec_from_file_location("kb_heldout", ROOT / "benchmarks" / "kb_heldout.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["kb_heldout"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def skills():
    return load_skills([bundled_skills_dir()])


def test_every_kernel_has_a_task_and_a_label():
    assert len(IDS) >= 30
    assert set(IDS) == set(LABELS)
    for kid in IDS:
        assert (BLIND / f"{kid}_task.py").is_file(), kid


def test_split_is_about_one_third_tuning():
    tuning = [k for k, v in LABELS.items() if v["split"] == "tuning"]
    heldout = [k for k, v in LABELS.items() if v["split"] == "heldout"]
    assert len(tuning) + len(heldout) == len(LABELS)
    assert 0.25 <= len(tuning) / len(LABELS) <= 0.4


def test_labels_use_known_method_and_bottleneck_ids(skills):
    methods = {m.id for m in skills.methods}
    bottlenecks = {b.id for b in skills.bottlenecks}
    for kid, label in LABELS.items():
        assert label["bottleneck"] and set(label["bottleneck"]) <= bottlenecks, kid
        assert 1 <= len(label["first"]) <= 3, kid
        for key in ("first", "static_first", "must_not"):
            assert set(label.get(key) or []) <= methods, (kid, key)
        assert not set(label["first"]) & set(label.get("must_not") or []), kid
        assert label["why"].strip(), kid


@pytest.mark.parametrize("kid", IDS)
def test_task_and_kernel_are_kernelbench_shaped(kid):
    task = read_task(BLIND / f"{kid}_task.py")
    assert task is not None
    tree = ast.parse((BLIND / f"{kid}_kernel.py").read_text())
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "ModelNew" in classes
    task_tree = ast.parse((BLIND / f"{kid}_task.py").read_text())
    names = {n.name for n in task_tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    assert {"Model", "get_inputs", "get_init_inputs"} <= names


@pytest.mark.parametrize("kid", [k for k in IDS if (BLIND / "profiles" / f"{k}.csv").is_file()])
def test_captured_profiles_parse(kid):
    profile = load_profile(BLIND / "profiles" / f"{kid}.csv")
    assert profile.dominant() is not None


def test_benchmark_core_on_three_kernels(tmp_path):
    bench = _bench()
    settings = load_settings(home=tmp_path / "home")
    store = open_store(settings)
    ids = ["bl01_scale_shift_relu", "bl13_sgemm_naive", "bl23_iterated_update_small"]
    data = bench.evaluate_blind(settings=settings, store=store, ids=ids)
    assert [r["id"] for r in data["kernels"]] == ids
    for row in data["kernels"]:
        assert row["error"] is None, row
        assert row["static_permitted"], row["id"]
        if row["has_profile"]:
            assert row["permitted"] and row["bottleneck"] is not None, row["id"]
    summary = data["summary"]["all"]
    assert summary["kernels"] == 3 and summary["errors"] == 0
    with pytest.raises(KeyError):
        bench.evaluate_blind(settings=settings, store=store, ids=["no_such_kernel"])
