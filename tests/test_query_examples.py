"""Golden tests: the five examples with their real H200 profiles, queried against the bundled KB through
a real store (DuckDB file, Chroma collection, bundled MiniLM), through the API and the CLI."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelskill.cli import main
from kernelskill.config import load_settings
from kernelskill.errors import KernelskillError
from kernelskill.retrieval.api import query

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
MANIFEST = {e["name"]: e for e in json.loads((EX / "manifest.json").read_text())["examples"]}

#: what an expert expects for each example (bottleneck, case, first permitted methods)
GOLDEN = {
    # no sector counters in this capture, but b[i * n + col] and c[row * n + col] are unit stride in the source
    # (access_unit_stride): the hot L1 is operand re-reads, not wasted sectors
    "naive_gemm": {"tier": "M", "bottleneck": "onchip_operand_traffic", "case": "ot_naive_gemm",
                   "first": ["shared_memory_tiling", "register_blocking"]},
    "relu_vec4": {"tier": "L", "bottleneck": "memory_bandwidth", "case": "mb_l_single_stream",
                  "first": ["more_work_per_thread", "memory_level_parallelism"]},
    "row_softmax": {"tier": "L", "bottleneck": "memory_bandwidth", "case": "mb_softmax_multipass",
                    "first": ["online_softmax"]},
    "row_sum_divergent": {"tier": "L", "bottleneck": "memory_bandwidth", "case": "mb_l_reduction",
                          "first": ["vectorized_access_16b"]},
    "linear_gelu_residual": {"tier": "L", "bottleneck": "library_dominated", "case": "lib_gemm_epilogue",
                             "first": ["epilogue_fusion", "kernel_fusion"]},
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    h = tmp_path_factory.mktemp("query_home")
    from kernelskill.kb.home import open_store

    open_store(load_settings(home=h)).close()  # builds the KB from the bundled skills
    return h


@pytest.fixture(scope="module")
def settings(home: Path):
    return load_settings(home=home)


def _q(settings, name: str, *, profile: bool = True, hints: bool = False, **kw):
    """Query an example; ``hints=True`` adds the op-family context of the task and source and the
    profile's dominant-kernel share (retrieval/context.py ``query_context``) through ``context=``."""
    e = MANIFEST[name]
    prof = EX / e["profile"] if profile else None
    if hints:
        from kernelskill.retrieval.context import query_context
        from kernelskill.retrieval.profile import load_profile

        found = query_context((EX / e["kernel"]).read_text(), EX / e["task"],
                              load_profile(prof) if prof is not None else None)
        kw["context"] = {**found.fields, **kw.get("context", {})}
    return query(EX / e["kernel"], task=EX / e["task"], profile=prof, settings=settings, **kw)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(settings, name: str) -> None:
    r = _q(settings, name, hints=True)
    g = GOLDEN[name]
    assert not r.static_only
    assert (r.tier.name, r.bottleneck.id, r.case.id) == (g["tier"], g["bottleneck"], g["case"]), \
        (r.tier.reason, r.bottleneck.reason, r.case.reason)
    assert r.first_methods(len(g["first"])) == g["first"]
    # permitted = the case's methods in order, minus the forbidden ones
    forbidden = {f.id for f in r.forbidden}
    assert r.first_methods(99) == [m for m in r.case.methods if m not in forbidden]
    assert all(f.case == r.case.id for f in r.forbidden)
    # the trace explains the decision: the matched case was evaluated true with its inputs
    case_step = next(s for s in r.trace if s.kind == "case" and s.id == r.case.id)
    assert case_step.value is True
    b_step = next(s for s in r.trace if s.kind == "bottleneck" and s.id == r.bottleneck.id)
    cand = next(c for c in r.bottleneck.candidates if c.id == r.bottleneck.id)
    assert b_step.value is True or cand.forced_by
    for step in r.trace:
        if step.kind == "predicate" and step.expr:
            assert step.inputs, step.id  # every predicate names its inputs
    # vector ranking attached the nearest docs of each method, restricted to the permitted set
    assert r.query_text
    for p in r.permitted:
        assert all(d.id for d in p.docs)
    assert any(p.docs for p in r.permitted)
    assert all(d.method == p.id for p in r.permitted for d in p.docs)
    # each permitted method says how its worked example did on the H200 (the planner sees it too)
    assert all(p.measured and p.measured.hardware == "NVIDIA H200" and p.measured.speedup for p in r.permitted)


def test_naive_gemm_trace_contents(settings) -> None:
    r = _q(settings, "naive_gemm")
    steps = {(s.kind, s.id): s for s in r.trace}
    assert steps[("tier", "tier_m")].inputs == {"primary_limiter_util_pct": pytest.approx(65.52)}
    l1 = steps[("predicate", "l1_hot")]
    assert l1.inputs == {"l1_throughput_pct": pytest.approx(99.31)} and l1.value is True
    assert {"uncoalesced_access", "onchip_operand_traffic"} <= set(l1.used_by)
    assert steps[("derived", "l1_excess_pct")].value == pytest.approx(99.31 - 19.13)
    assert steps[("case", "ot_naive_gemm")].inputs == {"naive_gemm": True}
    fact = steps[("note", "access_unit_stride")]
    assert fact.value is True and "b[i * n + col]" in fact.note and "naive_gemm_kernel" in fact.note
    assert steps[("predicate", "coalescing_not_refuted")].value is False
    assert steps[("predicate", "access_coalesced")].inputs == {"global_sector_excess": None,
                                                               "access_unit_stride": True}
    assert r.profile.dominant == "naive_gemm_kernel" and r.profile.launches_per_forward == 1
    assert r.context["has_profile"] is True and r.context["task_dtype"] == "fp32"
    why = {(s.kind, s.id) for s in r.why()}
    assert ("predicate", "l1_hot") in why and ("case", "ot_naive_gemm") in why
    assert ("derived", "l1_excess_pct") in why
    ex = r.permitted[0].examples
    assert ex and all(Path(p).is_file() for p in ex), ex


def test_bandwidth_priority_rule_is_recorded(settings) -> None:
    r = _q(settings, "relu_vec4")
    cand = next(c for c in r.bottleneck.candidates if c.id == "memory_bandwidth")
    assert "dram_saturated" in cand.forced_by
    assert "forced by the priority rule" in r.bottleneck.reason


def test_multi_kernel_forward_with_cublas(settings) -> None:
    r = _q(settings, "linear_gelu_residual")
    p = r.profile
    assert p.launches_per_forward == 3 and p.dominant_vendor
    assert [k.in_source for k in p.kernels].count(True) == 2
    assert p.kernels[0].vendor and p.kernels[0].share_pct > 90
    assert r.context["vendor_kernel_dominant"] is True and r.context["launches_per_forward"] == 3
    assert any("vendor kernel" in n for n in r.notes)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_static_only(settings, name: str) -> None:
    r = _q(settings, name, profile=False)
    assert r.static_only and r.profile is None
    assert r.tier.name == "unknown" and "needs a profile" in r.tier.reason
    assert r.bottleneck.id is None and "static-only" in r.bottleneck.reason
    assert r.case.fallback and r.permitted
    assert r.notes[0].startswith("static-only")
    assert r.context["has_profile"] is False


def test_missing_column_gives_unknown_tier_with_reason(settings, tmp_path: Path) -> None:
    rows = list(csv.reader((EX / "profiles" / "relu_vec4.csv").open()))
    keep = [i for i, h in enumerate(rows[0]) if not h.startswith("sm__throughput")]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerows([[r[i] for i in keep] for r in rows])
    path = tmp_path / "relu_no_sm.csv"
    path.write_text(out.getvalue())
    r = query(EX / "kernels" / "relu_vec4.py", profile=path, settings=settings)
    assert r.tier.name == "unknown"
    assert "sm_throughput_pct is not in the profile (looked for sm__throughput" in r.tier.reason
    assert any(m.startswith("sm_throughput_pct") for m in r.profile.missing)


def test_profile_of_another_kernel_is_an_error(settings) -> None:
    with pytest.raises(KernelskillError, match=r"naive_gemm\.csv: profiles naive_gemm_kernel, not a kernel of "
                                               r".*relu_vec4\.py \(it defines relu_vec4_kernel\)"):
        query(EX / "kernels" / "relu_vec4.py", profile=EX / "profiles" / "naive_gemm.csv", settings=settings)


def test_given_features_without_extraction(settings) -> None:
    feats = {"kernel_structure_id": 0, "is_pointwise": True, "streaming_no_reuse": True,
             "has_vector_load_store": True, "is_aligned_vector_access": True, "has_reuse": False,
             "has_multiple_kernels_in_forward": False, "tc_eligible": False}
    r = query(EX / "kernels" / "relu_vec4.py", profile=EX / "profiles" / "relu_vec4.csv", settings=settings,
              features=feats)
    assert r.features.source == "given" and r.bottleneck.id == "memory_bandwidth"


def test_context_override_changes_vetoes(settings) -> None:
    strict = _q(settings, "linear_gelu_residual")
    loose = _q(settings, "linear_gelu_residual", context={"tolerance_atol": 0.05, "library_calls_allowed": True})
    # a fp32 task is checked at KernelBench's 1e-4 unless told otherwise
    assert strict.context["tolerance_atol"] == 1e-4 and loose.context["tolerance_atol"] == 0.05
    strict_active = {v.id for v in strict.vetoes}
    loose_active = {v.id for v in loose.vetoes}
    assert "no_precision_downcast_fp32" in strict_active and "no_precision_downcast_fp32" not in loose_active
    assert "no_library_when_forbidden" in strict_active and "no_library_when_forbidden" not in loose_active


# ----------------------------------------------------------------------------------------------- CLI
def _cli(home: Path, *args: str, code: int = 0):
    result = CliRunner().invoke(main, ["query", *args, "--home", str(home)], catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def test_cli_json_matches_api(home: Path, settings) -> None:
    e = MANIFEST["naive_gemm"]
    out = _cli(home, str(EX / e["kernel"]), "--profile", str(EX / e["profile"]), "--task", str(EX / e["task"]),
               "--json", "--explain").stdout
    data = json.loads(out)
    api = _q(settings, "naive_gemm")
    assert data["case"]["id"] == api.case.id and [m["id"] for m in data["permitted"]] == api.first_methods(99)
    assert data["trace"] and data["bottleneck"]["candidates"]


def test_cli_render_shows_why(home: Path) -> None:
    e = MANIFEST["naive_gemm"]
    out = _cli(home, str(EX / e["kernel"]), "--profile", str(EX / e["profile"])).stdout
    for text in ("tier M", "onchip_operand_traffic", "case ot_naive_gemm", "shared_memory_tiling", "why", "l1_hot"):
        assert text in out, text
    full = _cli(home, str(EX / e["kernel"]), "--profile", str(EX / e["profile"]), "--explain").stdout
    assert "trace" in full and "primary_limiter_util_pct" in full and len(full) > len(out)
    assert "access_unit_stride" in full and "naive_gemm_kernel" in full  # the static fact, with its line
    # a capture without the newer access counters: their names, and the ncu columns only with --explain
    assert "global_sectors" in out and "(looked for" not in out
    assert "global_sectors (looked for memory_l2_theoretical_sectors_global)" in " ".join(full.split())


def test_cli_static_only_says_so(home: Path) -> None:
    out = _cli(home, str(EX / "kernels" / "row_softmax.py")).stdout
    assert "static-only" in out


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        (lambda d: ("missing.py", None), "missing.py: no such kernel file"),
        (lambda d: ("plain.py", "print('no kernel here')\n"), "plain.py: no kernel found"),
        (lambda d: ("bad.csv", "this,is\nnot,ncu\n"), "bad.csv: not an ncu raw-page CSV"),
        (lambda d: ("other.csv", None), "profiles naive_gemm_kernel, not a kernel of"),
        (lambda d: ("ctx", None), "--context 'tolerance_atol': expected KEY=VALUE"),
    ],
)
def test_cli_bad_input_one_line_error(home: Path, tmp_path: Path, setup, fragment: str) -> None:
    name, content = setup(tmp_path)
    kernel = str(EX / "kernels" / "relu_vec4.py")
    args: list[str]
    if name == "missing.py":
        args = [str(tmp_path / name)]
    elif name == "plain.py":
        (tmp_path / name).write_text(content)
        args = [str(tmp_path / name)]
    elif name == "bad.csv":
        (tmp_path / name).write_text(content)
        args = [kernel, "--profile", str(tmp_path / name)]
    elif name == "other.csv":
        args = [kernel, "--profile", str(EX / "profiles" / "naive_gemm.csv")]
    else:
        args = [kernel, "--context", "tolerance_atol"]
    result = _cli(home, *args, code=2)
    err = result.stderr.strip()
    assert err.startswith("error: ") and fragment in err and "\n" not in err, err
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("wide", [None, 256, 4])
def test_ranking_equals_filtered_search(settings, monkeypatch: pytest.MonkeyPatch, wide: int | None) -> None:
    """Each permitted method gets the same nearest docs as a search filtered to that method alone: with
    the filtered search (small KB), and with the wide-then-filtered strategy of large KBs (forced here;
    exhaustive with 256, and with a tiny wide window that needs the filtered second search)."""
    from kernelskill.kb.home import open_store
    from kernelskill.retrieval import api, ranking

    if wide is not None:
        monkeypatch.setattr(ranking, "WIDE", wide)
        monkeypatch.setattr(ranking, "WIDE_FROM_DOCS", 0)
    api.clear_caches()
    r = _q(settings, "row_softmax")
    store = open_store(settings, read_only=True)
    for p in r.permitted:
        alone = store.search_docs(r.query_text, k=3, methods=[p.id])
        if wide == 4 and not p.docs:
            continue
        assert [d.id for d in p.docs] == [h.id for h in alone][: len(p.docs)], p.id
        assert p.docs, p.id
    api.clear_caches()
