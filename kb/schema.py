"""Pydantic models of the long-term memory (the knowledge base).

Every KB object has a stable ``id``, a ``version``, ``provenance`` and optional ``evidence``.
The YAML under ``kb/skills/`` is the source of truth; these models validate it, and the store
(``kb/store.py``) persists exactly what they describe.

Expressions (``Predicate.expr``, ``Field.expr``) use the small safe expression language
described in ``docs/CONTRACTS.md`` and evaluated by ``expr.py`` (no Python eval).
"""

from __future__ import annotations

import datetime as _dt
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic import Field as PField

SCHEMA_VERSION = 1
MAX_TEXT_CHARS = 64 * 1024  # any one text of an object (the longest bundled one is ~2.6k characters)
MAX_VERSION = 1_000_000

Id = Annotated[str, PField(pattern=r"^[a-z][a-z0-9_.\-]{1,79}$")]
StructureId = Annotated[int, PField(ge=0, le=4)]


class _Model(BaseModel):
    # defer_build: a model's validator is built on its first use, not at import (a query never uses some)
    # str_max_length: every text is bounded (the loader refuses longer scalars first, with their line)
    model_config = ConfigDict(extra="forbid", frozen=False, populate_by_name=True, defer_build=True,
                              str_max_length=MAX_TEXT_CHARS)


class Provenance(_Model):
    author: str = "kernelskill team"
    source: str = "expert knowledge"
    date: _dt.date = _dt.date(2026, 12, 2)


class Evidence(_Model):
    """One measurement (or a cited fact) backing a KB object."""

    kind: Literal["measured", "literature", "run"] = "measured"
    task: str | None = None
    before_ms: float | None = PField(default=None, ge=0)
    after_ms: float | None = PField(default=None, ge=0)
    speedup: float | None = PField(default=None, gt=0)
    hardware: str = "NVIDIA H200"
    date: _dt.date
    command: str | None = None
    #: the harness protocol (``kernelskill.protocols``) both variants were judged under, with the checks every
    #: candidate gets; None on records measured before the evidence script used the harness
    protocol: str | None = None
    eager_ms: float | None = PField(default=None, ge=0)  # eager PyTorch, the harness's baseline
    before_vs_eager: float | None = PField(default=None, gt=0)  # each variant's speedup over eager
    after_vs_eager: float | None = PField(default=None, gt=0)
    #: what the measurement says about the method: ``pays``, ``no_gain`` (the time saved is inside the
    #: timing noise) or ``slower``; derived from the speedup when not given (``no_gain`` needs the IQR)
    verdict: Literal["pays", "no_gain", "slower"] | None = None
    notes: str = ""

    @model_validator(mode="after")
    def _speedup_consistent(self) -> Evidence:
        if self.before_ms and self.after_ms and self.speedup is None:
            self.speedup = round(self.before_ms / self.after_ms, 4)
        if self.verdict is None and self.speedup is not None:
            self.verdict = "slower" if self.speedup < 1.0 else "pays"
        return self


class KBObject(_Model):
    id: Id
    version: int = PField(default=1, ge=1, le=MAX_VERSION)
    provenance: Provenance = PField(default_factory=Provenance)
    evidence: list[Evidence] = PField(default_factory=list)


class FieldKind(StrEnum):
    feature = "feature"  # one of the 18 static code features
    profile = "profile"  # a normalized ncu field
    derived = "derived"  # computed from other fields by ``expr``
    context = "context"  # facts about the task / run (dtype, tolerance, launches per forward)


class Field(KBObject):
    """A symbol that predicates may name. Lint rejects expressions that name anything else."""

    kind: FieldKind
    type: Literal["bool", "int", "float", "str"]
    description: str
    unit: str | None = None
    expr: str | None = None  # required for derived fields
    domain: list[str | int | float | bool] | None = None  # allowed values (enums, structure ids)
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _derived_needs_expr(self) -> Field:
        if self.kind == FieldKind.derived and not self.expr:
            raise ValueError(f"derived field {self.id!r} needs an expr")
        if self.kind != FieldKind.derived and self.expr:
            raise ValueError(f"only derived fields carry an expr ({self.id!r} is {self.kind.value})")
        return self


class Predicate(KBObject):
    """A named boolean condition over fields, e.g. ``dram_throughput_pct >= 80``."""

    description: str
    expr: str


class Tier(KBObject):
    """A headroom tier: ``lower <= value(field) < upper``. Missing field => tier ``unknown``."""

    name: str
    description: str
    field: str = "primary_limiter_util_pct"
    lower: float | None = None  # inclusive; None = unbounded
    upper: float | None = None  # exclusive; None = unbounded
    order: int = PField(default=0, ge=-MAX_VERSION, le=MAX_VERSION)  # display order, most headroom first

    @model_validator(mode="after")
    def _bounds(self) -> Tier:
        if self.lower is not None and self.upper is not None and self.lower >= self.upper:
            raise ValueError(f"tier {self.id!r}: lower ({self.lower}) must be < upper ({self.upper})")
        return self


class Bottleneck(KBObject):
    """A bottleneck class recognised by its signature (all predicates true)."""

    name: str
    description: str
    signature: list[str] = PField(min_length=1)  # predicate ids, all must hold
    priority: int = PField(default=100, ge=-MAX_VERSION, le=MAX_VERSION)  # lower = considered first
    forced_by: list[str] = PField(default_factory=list)  # priority rule: any true => ranked first
    metrics: list[str] = PField(default_factory=list)  # fields that characterise it (for display)


class Case(KBObject):
    """A decision case: bottleneck x tier x structure x feature gates -> ordered permitted methods."""

    title: str
    bottleneck: str | None = None  # None only for fallback cases
    tiers: list[str] = PField(default_factory=list)  # [] = any tier (unknown included)
    structures: list[StructureId] = PField(default_factory=list)  # [] = any structure
    when: list[str] = PField(default_factory=list)  # predicate ids, all must be true
    unless: list[str] = PField(default_factory=list)  # predicate ids, none may be true
    methods: list[str] = PField(min_length=1)  # ordered, best first
    rationale: str
    priority: int = PField(default=100, ge=-MAX_VERSION, le=MAX_VERSION)  # lower wins among matching cases
    fallback: bool = False

    @model_validator(mode="after")
    def _fallback_shape(self) -> Case:
        if self.bottleneck is None and not self.fallback:
            raise ValueError(f"case {self.id!r}: a case without bottleneck must be fallback: true")
        if len(set(self.methods)) != len(self.methods):
            raise ValueError(f"case {self.id!r}: methods repeat")
        return self


class Veto(KBObject):
    """A global forbidden rule, applied as data.

    scope ``query``: when every ``when`` predicate holds, the listed methods (and methods carrying
    any listed tag) are removed from the permitted set. scope ``candidate``: ``patterns`` (regexes)
    are checked against generated code by the reviewer/harness. A veto may have both.
    """

    title: str
    rationale: str
    when: list[str] = PField(default_factory=list)  # [] = always
    methods: list[str] = PField(default_factory=list)
    tags: list[str] = PField(default_factory=list)
    patterns: list[str] = PField(default_factory=list)
    scope: list[Literal["query", "candidate"]] = PField(default_factory=lambda: ["query"])

    @model_validator(mode="after")
    def _does_something(self) -> Veto:
        if not (self.methods or self.tags or self.patterns):
            raise ValueError(f"veto {self.id!r} forbids nothing (needs methods, tags or patterns)")
        return self


class Direction(StrEnum):
    up = "up"
    down = "down"


class ExpectedEffect(_Model):
    field: str  # a normalized profile or derived field
    direction: Direction
    note: str = ""


class WorkedExample(_Model):
    """Paths relative to ``kb/skills/`` (or the folder of the YAML that declares them)."""

    task: str
    before: str
    after: str
    notes: str = ""


class Method(KBObject):
    name: str
    category: str  # memory | compute | parallelism | synchronization | launch | algorithm | library
    tags: list[str] = PField(default_factory=list)
    intent: str
    mechanism: str
    requires: list[str] = PField(default_factory=list)  # predicate ids that must hold to apply it
    preconditions: str  # prose: which code features / profile fields must hold
    expected_effects: list[ExpectedEffect] = PField(default_factory=list)
    risks: list[str] = PField(default_factory=list)
    pitfalls: list[str] = PField(default_factory=list)
    forbidden_patterns: list[str] = PField(default_factory=list)
    guidance: str
    bottlenecks: list[str] = PField(default_factory=list)  # where it usually helps (metadata)
    structures: list[StructureId] = PField(default_factory=list)
    example: WorkedExample | None = None

    def measurements(self) -> list[Evidence]:
        """The ``measured`` evidence records (runs of the worked example on a GPU), in file order."""
        return [e for e in self.evidence if e.kind == "measured"]

    def latest_measurement(self) -> Evidence | None:
        """The newest measurement (by date; the later record when two share a date)."""
        records = self.measurements()
        return max(reversed(records), key=lambda e: e.date) if records else None


class SkillDoc(KBObject):
    """The text vector search ranks. One per method is generated from the method itself;
    more can be written by hand (case studies, pitfalls)."""

    method: str
    title: str
    text: str
    kind: Literal["guidance", "example", "case_study", "pitfall"] = "guidance"
    bottlenecks: list[str] = PField(default_factory=list)
    structures: list[StructureId] = PField(default_factory=list)
    tiers: list[str] = PField(default_factory=list)

    @field_validator("text")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("text must not be empty")
        return v


#: YAML top-level key -> model. A skills file is a mapping of any of these keys to lists.
SECTIONS: dict[str, type[KBObject]] = {
    "fields": Field,
    "predicates": Predicate,
    "tiers": Tier,
    "bottlenecks": Bottleneck,
    "cases": Case,
    "vetoes": Veto,
    "methods": Method,
    "docs": SkillDoc,
}

#: The 18 static code features ; names are part of the public contract.
FEATURE_NAMES: tuple[str, ...] = (
    "has_reuse",
    "streaming_no_reuse",
    "has_vector_load_store",
    "kernel_structure_id",
    "is_aligned_vector_access",
    "has_tail_handling_overhead",
    "has_multiple_kernels_in_forward",
    "tc_eligible",
    "is_pointwise",
    "uses_transcendentals",
    "is_naive_gemm",
    "has_k_loop",
    "is_gemm_kloop",
    "is_stencil_conv",
    "has_shared_memory_tile",
    "uses_vector_types",
    "has_bounds_check",
    "cudagraph_eligible",
)
