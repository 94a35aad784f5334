"""The rule engine's semantics on a small hand-written KB: tiers, priority rules with deterministic
fallback, case choice, vetoes, requires, three-valued gates, and the trace.

Every test runs twice: on the in-memory reader over the loaded schema objects, and on a real store
(DuckDB file + Chroma collection + the bundled embedder) built from the same YAML, so the SQL filter of
``cases_for`` and the Python one must agree.
"""

from __future__ import annotations

import textwrap

import pytest

from kernelskill.kb.loader import load_skills
from kernelskill.retrieval.engine import decide
from kernelskill.retrieval.memory_kb import MemoryKB

SKILLS = textwrap.dedent("""
    fields:
      - {id: dram_throughput_pct, kind: profile, type: float, description: DRAM percent of peak}
      - {id: l2_throughput_pct, kind: profile, type: float, description: L2 percent of peak}
      - {id: sm_throughput_pct, kind: profile, type: float, description: SM percent of peak}
      - id: primary_limiter_util_pct
        kind: derived
        type: float
        expr: max(dram_throughput_pct, l2_throughput_pct, sm_throughput_pct)
        description: busiest unit
      - id: memory_util_pct
        kind: derived
        type: float
        expr: max(dram_throughput_pct, l2_throughput_pct)
        description: busiest memory unit
      - {id: kernel_structure_id, kind: feature, type: int, domain: [0, 1, 2, 3, 4], description: structure}
      - {id: has_reuse, kind: feature, type: bool, description: reuse}
      - {id: tc_eligible, kind: feature, type: bool, description: tensor cores apply}
      - {id: has_profile, kind: context, type: bool, description: profiled}
      - {id: arch_sm, kind: context, type: int, description: arch}
      - {id: task_dtype, kind: context, type: str, domain: [fp32, fp16, bf16, mixed], description: dtype}
    predicates:
      - {id: dram_hot, description: x, expr: dram_throughput_pct >= 80}
      - {id: mem_busy, description: x, expr: memory_util_pct >= 60}
      - {id: sm_busy, description: x, expr: sm_throughput_pct >= 60}
      - {id: mem_leads, description: x, expr: memory_util_pct >= sm_throughput_pct}
      - {id: reuse, description: x, expr: has_reuse}
      - {id: no_reuse, description: x, expr: not has_reuse}
      - {id: tc, description: x, expr: tc_eligible}
      - {id: profiled, description: x, expr: has_profile}
      - {id: static, description: x, expr: not has_profile}
      - {id: pre_hopper, description: x, expr: arch_sm < 90}
      - {id: half, description: x, expr: 'task_dtype in ["fp16", "bf16"]'}
    tiers:
      - {id: tier_h, name: H, order: 0, lower: 0, upper: 60, description: high headroom}
      - {id: tier_m, name: M, order: 1, lower: 60, upper: 80, description: medium}
      - {id: tier_l, name: L, order: 2, lower: 80, description: low}
    bottlenecks:
      - {id: compute, name: Compute, priority: 10, signature: [sm_busy], description: x}
      - {id: bandwidth, name: Bandwidth, priority: 20, signature: [mem_busy, mem_leads], forced_by: [dram_hot],
         description: x}
    cases:
      - id: bw_reuse
        title: bandwidth with reuse
        bottleneck: bandwidth
        when: [reuse]
        methods: [m_tile, m_vec]
        rationale: r
      - id: bw_low_only
        title: bandwidth at tier L, structure 1
        bottleneck: bandwidth
        tiers: [tier_l]
        structures: [1]
        when: [reuse]
        methods: [m_fuse]
        priority: 5
        rationale: r
      - id: compute_generic
        title: compute, any
        bottleneck: compute
        methods: [m_vec, m_tile, m_tc]
        priority: 50
        rationale: r
      - id: compute_tc
        title: compute with tensor cores
        bottleneck: compute
        when: [tc]
        unless: [half]
        methods: [m_tc, m_wgmma, m_tile, m_vec, m_ghost]
        priority: 50
        rationale: r
      - id: fb_static
        title: static-only
        fallback: true
        when: [static]
        methods: [m_vec, m_tile]
        priority: 10
        rationale: r
      - id: fb_any
        title: anything
        fallback: true
        methods: [m_fuse]
        priority: 999
        rationale: r
    vetoes:
      - {id: v_nocache, title: no caching without reuse, when: [no_reuse], tags: [caching], rationale: r}
      - {id: v_hopper, title: hopper only, when: [pre_hopper], methods: [m_wgmma], rationale: r}
    methods:
      - {id: m_tile, name: tiling, category: memory, tags: [caching], intent: i, mechanism: m,
         preconditions: p, guidance: g tile}
      - {id: m_vec, name: vectorize, category: memory, tags: [vectorization], intent: i, mechanism: m,
         preconditions: p, guidance: g vec}
      - {id: m_tc, name: tensor cores, category: compute, tags: [tensor_core], requires: [tc], intent: i,
         mechanism: m, preconditions: p, guidance: g tc}
      - {id: m_wgmma, name: wgmma, category: compute, tags: [hopper_only], intent: i, mechanism: m,
         preconditions: p, guidance: g wgmma}
      - {id: m_fuse, name: fusion, category: launch, intent: i, mechanism: m, preconditions: p,
         guidance: g fuse}
""")


@pytest.fixture(scope="module")
def skills(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("engine_skills")
    (root / "kb.yaml").write_text(SKILLS)
    return load_skills([root])


@pytest.fixture(scope="module", params=["memory", "store"])
def kb(request: pytest.FixtureRequest, skills, tmp_path_factory: pytest.TempPathFactory):
    if request.param == "memory":
        return MemoryKB.from_skillset(skills)
    from kernelskill.kb.embed import Embedder
    from kernelskill.kb.store import KBStore

    store = KBStore.open(tmp_path_factory.mktemp("engine_kb") / "kb", embedder=Embedder.get(None))
    store.ingest(skills, check=False)  # the toy KB leaves lint warnings (coverage) on purpose
    return store


def env(**kw):
    base = {"has_profile": True, "arch_sm": 90, "kernel_structure_id": 1, "has_reuse": False,
            "tc_eligible": False, "task_dtype": "fp32"}
    base.update(kw)
    return base


def test_tier_from_bounds_and_unknown_with_reason(kb) -> None:
    d = decide(kb, env(dram_throughput_pct=10, l2_throughput_pct=20, sm_throughput_pct=65), structure=1)
    assert (d.tier.id, d.tier.name, d.tier.value) == ("tier_m", "M", 65)
    assert "[60, 80)" in d.tier.reason
    d = decide(kb, env(dram_throughput_pct=10, l2_throughput_pct=20), structure=1,
               why_missing={"sm_throughput_pct": "is not in the profile (looked for sm__throughput.avg)"})
    assert d.tier.name == "unknown" and d.tier.id is None
    assert "sm_throughput_pct is not in the profile (looked for sm__throughput.avg)" in d.tier.reason
    assert "primary_limiter_util_pct" in d.tier.reason


def test_forced_bottleneck_without_matching_case_falls_back_to_next_candidate(kb) -> None:
    # dram 85 forces bandwidth to the front although its signature fails (the SM leads);
    # its cases need reuse, so the engine moves on to compute, whose signature holds.
    d = decide(kb, env(dram_throughput_pct=85, l2_throughput_pct=50, sm_throughput_pct=90), structure=1)
    considered = [c for c in d.bottleneck.candidates if c.considered]
    assert [c.id for c in considered] == ["bandwidth", "compute"]
    assert considered[0].signature is False and considered[0].forced_by == ["dram_hot"]
    assert considered[0].outcome == "no case matched"
    assert considered[1].outcome == "matched compute_generic"
    assert d.bottleneck.id == "compute" and d.case.id == "compute_generic"
    assert "chosen after bandwidth had no matching case" in d.bottleneck.reason
    tried = [a.case for a in d.case.attempts]
    assert set(tried[:2]) == {"bw_low_only", "bw_reuse"} and "compute_generic" in tried[2:]


def test_forced_even_when_signature_fails(kb) -> None:
    d = decide(kb, env(dram_throughput_pct=85, l2_throughput_pct=0, sm_throughput_pct=95, has_reuse=True),
               structure=0)
    assert d.bottleneck.id == "bandwidth" and d.case.id == "bw_reuse"
    assert "forced by the priority rule dram_hot" in d.bottleneck.reason
    assert d.tier.name == "L"


def test_tier_and_structure_filter_and_priority(kb) -> None:
    d = decide(kb, env(dram_throughput_pct=90, l2_throughput_pct=0, sm_throughput_pct=0, has_reuse=True),
               structure=1)
    assert d.case.id == "bw_low_only"  # priority 5, tier_l and structure 1 admitted
    d = decide(kb, env(dram_throughput_pct=90, l2_throughput_pct=0, sm_throughput_pct=0, has_reuse=True),
               structure=0)
    assert d.case.id == "bw_reuse"  # structure 0 is not in [1]


def test_most_specific_wins_among_equal_priorities(kb) -> None:
    d = decide(kb, env(dram_throughput_pct=0, l2_throughput_pct=0, sm_throughput_pct=90, tc_eligible=True),
               structure=1)
    assert d.case.id == "compute_tc"  # same priority as compute_generic, one more gate


def test_unless_true_blocks_and_unknown_unless_does_not(kb) -> None:
    base = {"dram_throughput_pct": 0, "l2_throughput_pct": 0, "sm_throughput_pct": 90, "tc_eligible": True}
    d = decide(kb, env(**base, task_dtype="bf16"), structure=1)
    assert d.case.id == "compute_generic"
    tc_attempt = next(a for a in d.case.attempts if a.case == "compute_tc")
    assert tc_attempt.failed == ["unless half"]
    e = env(**base)
    del e["task_dtype"]
    assert decide(kb, e, structure=1).case.id == "compute_tc"


def test_unknown_when_blocks_and_is_reported(kb) -> None:
    e = env(dram_throughput_pct=0, l2_throughput_pct=0, sm_throughput_pct=90)
    del e["tc_eligible"]
    d = decide(kb, e, structure=1)
    assert d.case.id == "compute_generic"
    assert next(a for a in d.case.attempts if a.case == "compute_tc").unknown == ["tc"]


def test_vetoes_by_tag_and_id_and_requires(kb) -> None:
    d = decide(kb, env(dram_throughput_pct=0, l2_throughput_pct=0, sm_throughput_pct=90, tc_eligible=True,
                       arch_sm=80), structure=1)
    assert d.case.id == "compute_tc"
    assert [m.id for m in d.permitted] == ["m_tc", "m_vec"]
    forbidden = {f.id: f for f in d.forbidden}
    assert forbidden["m_wgmma"].veto == "v_hopper" and "by id" in forbidden["m_wgmma"].reason
    assert forbidden["m_tile"].veto == "v_nocache" and "by tag caching" in forbidden["m_tile"].reason
    assert forbidden["m_ghost"].by == "unknown_method"
    assert {v.id: v.removed for v in d.vetoes} == {"v_hopper": ["m_wgmma"], "v_nocache": ["m_tile"]}


def test_requires_false_removes_the_method(kb) -> None:
    # compute_generic lists m_tc, which requires tc: without tensor-core work it is forbidden by `requires`,
    # and only by it (no veto names m_tc); with tc true the same method is permitted by compute_tc.
    d = decide(kb, env(dram_throughput_pct=0, l2_throughput_pct=0, sm_throughput_pct=90), structure=1)
    assert d.case.id == "compute_generic"
    assert "m_tc" not in [m.id for m in d.permitted]
    assert [(f.id, f.by) for f in d.forbidden if f.id == "m_tc"] == [("m_tc", "requires")]
    assert any(s.kind == "requires" and s.id == "m_tc" and s.value is False for s in d.trace)
    d = decide(kb, env(dram_throughput_pct=0, l2_throughput_pct=0, sm_throughput_pct=90, tc_eligible=True),
               structure=1)
    assert d.case.id == "compute_tc" and "m_tc" in [m.id for m in d.permitted]


def test_static_only_goes_to_the_fallback_and_says_why(kb) -> None:
    e = env(has_profile=False)
    d = decide(kb, e, structure=1, why_missing={"dram_throughput_pct": "needs a profile (static-only)"})
    assert d.tier.name == "unknown" and "needs a profile" in d.tier.reason
    assert d.bottleneck.id is None and "static-only" in d.bottleneck.reason
    assert d.case.id == "fb_static" and d.case.fallback
    assert [m.id for m in d.permitted] == ["m_vec"]  # m_tile vetoed: no reuse
    assert all(c.signature is None for c in d.bottleneck.candidates)


def test_all_candidates_fail_then_general_fallback(kb) -> None:
    d = decide(kb, env(dram_throughput_pct=85, l2_throughput_pct=0, sm_throughput_pct=0), structure=1)
    assert d.bottleneck.id is None and d.case.id == "fb_any"
    assert "bandwidth" in d.bottleneck.reason
    assert d.case.reason.startswith("no case of bandwidth matched")


def test_trace_records_each_predicate_once_with_inputs_and_users(kb) -> None:
    d = decide(kb, env(dram_throughput_pct=85, l2_throughput_pct=50, sm_throughput_pct=70), structure=1)
    preds = [s for s in d.trace if s.kind == "predicate"]
    assert len({s.id for s in preds}) == len(preds)
    dram = next(s for s in preds if s.id == "dram_hot")
    assert dram.expr == "dram_throughput_pct >= 80" and dram.inputs == {"dram_throughput_pct": 85}
    assert dram.value is True and "bandwidth" in dram.used_by
    derived = {s.id: s for s in d.trace if s.kind == "derived"}
    assert derived["primary_limiter_util_pct"].value == 85
    assert derived["primary_limiter_util_pct"].inputs == {"dram_throughput_pct": 85, "l2_throughput_pct": 50,
                                                          "sm_throughput_pct": 70}
    kinds = [s.kind for s in d.trace]
    assert kinds.index("derived") < kinds.index("tier") < kinds.index("bottleneck") < kinds.index("case")
    assert any(s.kind == "veto" and s.id == "v_nocache" and s.value is True for s in d.trace)


def test_deterministic(kb) -> None:
    e = env(dram_throughput_pct=85, l2_throughput_pct=50, sm_throughput_pct=70)
    a = decide(kb, e, structure=1)
    b = decide(kb, e, structure=1)
    assert [s.model_dump() for s in a.trace] == [s.model_dump() for s in b.trace]
    assert [m.id for m in a.permitted] == [m.id for m in b.permitted]


def test_undefined_predicate_is_unknown_not_a_crash(skills) -> None:
    from kernelskill.kb.schema import Case

    kb = MemoryKB.from_skillset(skills)
    kb._cases.insert(0, Case(id="typo", title="t", bottleneck="compute", when=["no_such_pred"],
                             methods=["m_vec"], rationale="r", priority=1))
    d = decide(kb, env(dram_throughput_pct=0, l2_throughput_pct=0, sm_throughput_pct=90), structure=1)
    assert d.case.id == "compute_generic"
    step = next(s for s in d.trace if s.id == "no_such_pred")
    assert step.value is None and "undefined predicate" in step.note


def test_static_fusion_keeps_the_case_order_in_charge() -> None:
    """Static-only ranking (retrieval/ranking.py): the case order weighs twice as much as similarity and
    no method rises more than one place above its case rank, over every similarity order of a 3-7
    method list; ties keep the case order, and a strong similarity lead still moves a method up."""
    from itertools import permutations

    from kernelskill.retrieval.ranking import CASE_WEIGHT, MAX_RISE, fuse_orders, fused_score
    from kernelskill.retrieval.result import PermittedMethod

    assert (CASE_WEIGHT, MAX_RISE) == (2.0, 1)
    assert fused_score(1, 3) > fused_score(2, 1)  # two similarity places do not beat one case place
    moved = 0
    for n in range(3, 8):
        methods = [PermittedMethod(id=f"m{c}", name=f"m{c}", rank=c, case_rank=c, source_case="x") for c in range(1, n + 1)]
        for sim in permutations(range(1, n + 1)):
            order = fuse_orders(list(methods), {f"m{c}": sim[c - 1] for c in range(1, n + 1)})
            assert sorted(p.id for p in order) == sorted(p.id for p in methods)
            assert all(p.case_rank - pos <= MAX_RISE for pos, p in enumerate(order, start=1)), (sim, order)
            moved += any(p.case_rank != pos for pos, p in enumerate(order, start=1))
    assert moved  # similarity does reorder some lists


def test_the_query_uses_the_harness_tolerance(tmp_path) -> None:
    """A fp32 task is strict at KernelBench's 1e-4 (precision methods vetoed); a harness configured to
    check at 1e-2 lets the same query permit them, so the query and the harness agree."""
    import subprocess
    import sys

    from kernelskill.config import load_settings
    from kernelskill.retrieval.context import default_tolerance, settings_context

    assert default_tolerance("fp32") == {"tolerance_atol": 1e-4, "tolerance_rtol": 1e-4}
    assert default_tolerance("mixed") == {}
    loose = load_settings(home=tmp_path, environ={"KERNELSKILL_HARNESS_ATOL": "0.01"}, cwd=tmp_path)
    assert settings_context(loose)["tolerance_atol"] == 0.01
    assert "tolerance_atol" not in settings_context(load_settings(home=tmp_path, environ={}, cwd=tmp_path))
    # the shared table imports without torch (a cold query must not pay for it)
    code = "import sys, kernelskill.retrieval.context as c; c.default_tolerance('fp32'); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
