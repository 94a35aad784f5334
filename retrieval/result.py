"""The answer of ``kernelskill query``: pydantic models, JSON-serializable, with the full trace."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Value = bool | int | float | str | None


class _Model(BaseModel):
    # defer_build: a model's validator is built on its first use, not at import (a query never uses some)
    model_config = ConfigDict(extra="forbid", defer_build=True)


class TraceStep(_Model):
    """One evaluation: a derived field, a tier bound, a predicate, a gate or a veto."""

    kind: Literal["derived", "tier", "predicate", "bottleneck", "case", "veto", "requires", "note"]
    id: str
    expr: str = ""
    inputs: dict[str, Value] = Field(default_factory=dict)
    value: Value = None
    used_by: list[str] = Field(default_factory=list)  # the bottleneck / case / veto that consulted it
    note: str = ""


class KernelSummary(_Model):
    name: str
    base_name: str
    launches: int
    total_duration_ns: float | None
    share_pct: float | None  # of the forward's profiled time
    vendor: bool
    in_source: bool  # defined in the kernel file being queried


class ProfileSummary(_Model):
    source: str
    units: str
    dominant: str  # base name of the dominant kernel
    dominant_vendor: bool
    launches_per_forward: int
    kernels: list[KernelSummary]
    fields: dict[str, Value]  # normalized fields of the dominant kernel
    derived: dict[str, Value] = Field(default_factory=dict)  # derived fields (fields.yaml expressions)
    field_sources: dict[str, str] = Field(default_factory=dict)  # normalized field -> raw ncu column
    missing: list[str] = Field(default_factory=list)  # "field (looked for a, b)"
    notes: list[str] = Field(default_factory=list)


KernelOp = Literal["gemm", "conv", "attention", "softmax", "normalization", "reduction", "elementwise", "copy",
                   "other"]


class KernelDiagnosis(_Model):
    """One kernel of the forward: its share of the time, the operation it implements and its own verdict."""

    name: str  # base name (the function name alone)
    full_name: str = ""  # as ncu printed it
    launches: int = 0
    time_ns: float | None = None  # summed over its launches in one forward
    share_pct: float | None = None  # of the forward's profiled time; None without a profile
    vendor: bool = False
    in_source: bool = False
    op: KernelOp
    op_reason: str = ""  # what decided the operation (its name, its code, the task's forward)
    tier: str = "unknown"  # its own headroom tier (H/M/L) from its own counters
    tier_id: str | None = None
    tier_reason: str = ""
    bottleneck: str | None = None  # its own first bottleneck candidate (signature or priority rule)
    bottleneck_name: str | None = None
    bottleneck_reason: str = ""
    metrics: dict[str, Value] = Field(default_factory=dict)  # the values that decided tier and bottleneck
    dominant: bool = False  # takes the most time
    target: bool = False  # the case and methods were chosen for this kernel


class FeatureSummary(_Model):
    values: dict[str, bool | int]
    kernels: list[str] = Field(default_factory=list)
    launches: list[str] = Field(default_factory=list)
    undecided: list[str] = Field(default_factory=list)
    evidence: dict[str, list[str]] = Field(default_factory=dict)  # feature -> "line N: text (rule)"
    source: Literal["extracted", "given"] = "extracted"


class TierResult(_Model):
    id: str | None = None  # the tier's id (cases name tiers by id); None when unknown
    name: str  # the tier's label (H/M/L) or "unknown"
    field: str
    value: float | None
    reason: str


class BottleneckCandidate(_Model):
    id: str
    name: str
    priority: int
    signature: Value  # True / False / None (unknown)
    forced_by: list[str] = Field(default_factory=list)  # priority-rule predicates that held
    considered: bool  # tried for cases (signature true or forced)
    outcome: str = ""  # "matched <case>", "no case matched", "not tried"


class BottleneckResult(_Model):
    id: str | None
    name: str | None
    reason: str
    candidates: list[BottleneckCandidate] = Field(default_factory=list)


class CaseAttempt(_Model):
    case: str
    bottleneck: str | None
    fallback: bool
    matched: bool
    failed: list[str] = Field(default_factory=list)  # predicates that kept it from matching
    unknown: list[str] = Field(default_factory=list)  # `when` predicates that were unknown


class CaseResult(_Model):
    id: str | None
    title: str | None
    rationale: str | None
    bottleneck: str | None
    fallback: bool = False
    priority: int | None = None
    methods: list[str] = Field(default_factory=list)  # the case's ordered list, before vetoes
    reason: str = ""
    attempts: list[CaseAttempt] = Field(default_factory=list)


class DocRef(_Model):
    id: str
    method: str
    title: str
    distance: float
    kind: str | None = None
    text: str = ""


class MeasuredExample(_Model):
    """The method's worked example as measured (its latest ``measured`` evidence record)."""

    task: str | None = None
    before_ms: float | None = None
    after_ms: float | None = None
    speedup: float | None = None
    verdict: Literal["pays", "no_gain", "slower"] | None = None
    hardware: str
    date: str
    #: the baseline the speedup hides: eager PyTorch on the example's task, and each variant against it
    eager_ms: float | None = None
    before_vs_eager: float | None = None
    after_vs_eager: float | None = None

    def summary(self) -> str:
        """``"5.14x over its before (before 0.20x, after 1.00x of eager) on NVIDIA H200, 2026-12-02"``: the
        speedup over the example's own naive before, and where both stand against eager PyTorch."""
        ratio = f"{self.speedup:.2f}x over its before" if self.speedup is not None else "unmeasured"
        said = {"pays": "", "no_gain": " (no gain beyond timing noise)", "slower": " (slower)"}.get(self.verdict or "", "")
        base = ""
        if self.before_vs_eager is not None and self.after_vs_eager is not None:
            base = f" (before {self.before_vs_eager:.2f}x, after {self.after_vs_eager:.2f}x of eager)"
        elif self.after_vs_eager is not None:
            base = f" (after {self.after_vs_eager:.2f}x of eager)"
        return f"{ratio}{said}{base} on {self.hardware}, {self.date}"


class PermittedMethod(_Model):
    id: str
    name: str
    rank: int  # 1 = try first
    case_rank: int  # position in the case's list
    source_case: str | None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    guidance: str = ""
    examples: list[str] = Field(default_factory=list)  # worked example files (task, before, after)
    docs: list[DocRef] = Field(default_factory=list)
    similarity: float | None = None  # 1 - best doc distance
    measured: MeasuredExample | None = None  # how its worked example did on the GPU (None: never measured)
    notes: list[str] = Field(default_factory=list)


class ForbiddenMethod(_Model):
    id: str
    name: str | None = None
    reason: str
    by: Literal["veto", "requires", "unknown_method"]
    veto: str | None = None
    case: str | None = None


class AppliedMethod(_Model):
    """A method the queried kernel already applies (retrieval/applied_methods.yaml): not offered again."""

    id: str
    line: int | None = None  # the source line that shows it (None: decided from features or context)
    evidence: str = ""
    rule: str = ""
    in_case: bool = False  # the matched case lists it (so it would have been offered)


class VetoApplied(_Model):
    id: str
    title: str
    rationale: str
    methods: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)  # methods of the chosen case it took out


WhyStatus = Literal["permitted", "applied", "failed", "vetoed", "requires", "not_in_case", "unknown_method"]


class WhyReason(_Model):
    kind: str  # permitted | below_cut | applied | failed | veto | requires | not_in_case | case_* | unknown_method
    text: str
    values: dict[str, Value] = Field(default_factory=dict)


class MethodWhy(_Model):
    method: str
    status: WhyStatus
    in_answer: bool
    rank: int | None = None
    reasons: list[WhyReason] = Field(default_factory=list)

    def lines(self) -> list[str]:
        return [r.text for r in self.reasons]


class RouteCeiling(_Model):
    """One route for the operation that holds the time, with its speed-of-light ceiling (retrieval/routes.py)."""

    route: str  # library | library_compensated | fused_epilogue | tensor_core | hand_tiles | one_pass
    methods: list[str] = Field(default_factory=list)  # the KB methods that take it
    allowed: bool  # the protocol's vetoes leave at least one of its methods
    why_not: str = ""  # the vetoes that remove it
    rate: str  # what it computes at: "fp32 CUDA cores 60 TFLOP/s", "bandwidth 4.3 TB/s"
    ceiling_ms: float | None = None  # max(bytes / bandwidth, FLOPs / rate) for this task's work
    current: bool = False  # the route the kernel takes now
    pct_of_ceiling: float | None = None  # ceiling / measured forward time, in percent


class RouteReport(_Model):
    op: str
    kernel: str | None = None
    device: str
    flops: float | None = None
    bytes: float | None = None
    work: str = ""  # how the work was estimated (or why it was not)
    forward_ms: float | None = None  # the profiled kernels' time of one forward
    current_route: str | None = None
    at_roofline_pct: float = 90.0
    at_roofline: bool = False  # the current kernel is within at_roofline_pct of its route's ceiling
    verdict: str = ""
    routes: list[RouteCeiling] = Field(default_factory=list)


class QueryResult(_Model):
    kernel: str
    task: str | None = None
    static_only: bool
    features: FeatureSummary
    context: dict[str, Value] = Field(default_factory=dict)
    profile: ProfileSummary | None = None
    kernels: list[KernelDiagnosis] = Field(default_factory=list)  # by share of time; source kernels if static
    target_kernel: str | None = None  # the kernel the case and methods were chosen for
    tier: TierResult
    bottleneck: BottleneckResult
    case: CaseResult
    permitted: list[PermittedMethod] = Field(default_factory=list)
    forbidden: list[ForbiddenMethod] = Field(default_factory=list)
    vetoes: list[VetoApplied] = Field(default_factory=list)
    applied: list[AppliedMethod] = Field(default_factory=list)  # already in the kernel, not offered
    routes: RouteReport | None = None  # the strategic routes of the target kernel's op, with ceilings
    query_text: str = ""
    trace: list[TraceStep] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    method_why: MethodWhy | None = None  # set by `query --why METHOD` (retrieval.api.why_method)

    def first_methods(self, n: int = 3) -> list[str]:
        return [m.id for m in self.permitted[:n]]

    def why(self) -> list[TraceStep]:
        """The steps that decided the answer: the tier, the chosen bottleneck's signature and priority
        rules, the matched case's gates and the vetoes that removed something."""
        keep: set[str] = set()
        if self.case.id:
            keep.add(self.case.id)
        if self.bottleneck.id:
            keep.add(self.bottleneck.id)
        keep |= {v.id for v in self.vetoes if v.removed}
        steps = [s for s in self.trace if s.kind == "tier" or s.id in keep or keep.intersection(s.used_by)]
        feeding = {name for s in steps if s.kind == "predicate" for name in s.inputs}
        derived = [s for s in self.trace if s.kind == "derived" and s.id in feeding]
        return derived + steps

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
