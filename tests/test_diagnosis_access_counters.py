"""The access and divergence counters decide the diagnosis where a profile carries them: real H200
captures of the examples with those columns added (the values an access pathology or divergence would
show), queried through the real engine and a real store. Without the columns, the captures read as before
(tests/test_query_examples.py holds those answers)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from kernelskill.config import load_settings
from kernelskill.retrieval.api import query

EX = Path(__file__).resolve().parents[1] / "examples"
MANIFEST = {e["name"]: e for e in json.loads((EX / "manifest.json").read_text())["examples"]}
SECTORS, SECTORS_IDEAL = "memory_l2_theoretical_sectors_global", "memory_l2_theoretical_sectors_global_ideal"
BRANCH_EFFICIENCY = "smsp__sass_average_branch_targets_threads_uniform.pct"
DIVERGENT = "smsp__sass_branch_targets_threads_divergent.avg"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    from kernelskill.kb.home import open_store

    home = tmp_path_factory.mktemp("diagnosis_home")
    open_store(load_settings(home=home)).close()
    return load_settings(home=home)


def with_counters(name: str, out: Path, **columns: float) -> Path:
    """The example's capture with these raw columns set (replaced where present, appended otherwise)."""
    rows = list(csv.reader(io.StringIO((EX / MANIFEST[name]["profile"]).read_text())))
    head, units, data = rows[0], rows[1], rows[2:]
    for metric, value in columns.items():
        if metric not in head:
            head.append(metric)
            units.append("%" if metric.endswith(".pct") else "")
            for row in data:
                row.append("")
        i = head.index(metric)
        for row in data:
            row[i] = str(value)
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL).writerows([head, units, *data])
    out.write_text(buf.getvalue())
    return out


def ask(settings, name: str, tmp_path: Path, **columns: float):
    e = MANIFEST[name]
    profile = with_counters(name, tmp_path / f"{name}.csv", **columns)
    return query(EX / e["kernel"], task=EX / e["task"], profile=profile, settings=settings)


def forced(result) -> dict[str, list[str]]:
    return {c.id: list(c.forced_by) for c in result.bottleneck.candidates if c.forced_by}


def test_a_stream_at_the_dram_roof_moving_four_times_its_sectors_is_an_access_pathology(settings, tmp_path):
    r = ask(settings, "relu_vec4", tmp_path, **{SECTORS: 4e6, SECTORS_IDEAL: 1e6})
    assert r.bottleneck.id == "uncoalesced_access" and r.first_methods(1) == ["coalesced_access"]
    assert forced(r) == {"uncoalesced_access": ["access_uncoalesced"]}  # DRAM at 87 % no longer forces bandwidth


def test_the_same_stream_at_its_ideal_sectors_stays_bandwidth_bound(settings, tmp_path):
    r = ask(settings, "relu_vec4", tmp_path, **{SECTORS: 1e6, SECTORS_IDEAL: 1e6})
    assert (r.bottleneck.id, r.case.id) == ("memory_bandwidth", "mb_l_single_stream")


def test_severe_divergence_outranks_the_l1_reading(settings, tmp_path):
    r = ask(settings, "naive_gemm", tmp_path, **{BRANCH_EFFICIENCY: 70, DIVERGENT: 120})
    assert r.bottleneck.id == "branch_divergence" and "warp_uniform_control_flow" in r.first_methods(3)
    assert forced(r)["branch_divergence"] == ["divergence_severe"]


def test_a_branch_efficiency_without_divergent_targets_decides_nothing(settings, tmp_path):
    """ncu can report 0 % efficiency for a kernel whose warps took no counted branch: not divergence."""
    r = ask(settings, "naive_gemm", tmp_path, **{BRANCH_EFFICIENCY: 0, DIVERGENT: 0})
    # the answer without the counter (no sector counters, unit-stride source: tests/test_query_examples.py)
    assert (r.bottleneck.id, r.case.id) == ("onchip_operand_traffic", "ot_naive_gemm")
    assert "branch_divergence" not in forced(r)


def test_at_the_roof_bandwidth_still_comes_before_bank_conflicts(settings, tmp_path):
    """Both forced: priority orders them (docs/kb.md), so an L2-saturated softmax stays a bandwidth case."""
    r = ask(settings, "row_softmax", tmp_path, memory_l1_wavefronts_shared=8e5, memory_l1_wavefronts_shared_ideal=1e5)
    assert forced(r) == {"memory_bandwidth": ["l2_saturated"], "smem_bank_conflicts": ["smem_conflicted"]}
    assert (r.bottleneck.id, r.case.id) == ("memory_bandwidth", "mb_softmax_multipass")
