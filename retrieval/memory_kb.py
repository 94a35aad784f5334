"""A read-only KB over loaded schema objects, with the same reads as ``kb.store.KBStore``.

Used for what-if queries on YAML that is not ingested (a skills folder under review), and by the
engine's unit tests on schema objects. It has no vector index: ``search_docs`` returns nothing, so
ranking falls back to the case order.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelskill.kb.schema import Bottleneck, Case, Method, Predicate, Tier, Veto
from kernelskill.kb.schema import Field as KBField


class MemoryKB:
    def __init__(self, *, fields: Iterable[KBField] = (), predicates: Iterable[Predicate] = (),
                 tiers: Iterable[Tier] = (), bottlenecks: Iterable[Bottleneck] = (), cases: Iterable[Case] = (),
                 vetoes: Iterable[Veto] = (), methods: Iterable[Method] = (),
                 example_roots: dict[str, Path] | None = None) -> None:
        self._fields = list(fields)
        self._predicates = list(predicates)
        self._tiers = sorted(tiers, key=lambda t: (t.order, t.id))
        self._bottlenecks = sorted(bottlenecks, key=lambda b: (b.priority, b.id))
        self._cases = sorted(cases, key=lambda c: (c.priority, c.id))
        self._vetoes = sorted(vetoes, key=lambda v: v.id)
        self._methods = {m.id: m for m in methods}
        self._example_roots = dict(example_roots or {})

    @classmethod
    def from_skillset(cls, skills: Any) -> MemoryKB:
        return cls(fields=skills.fields, predicates=skills.predicates, tiers=skills.tiers,
                   bottlenecks=skills.bottlenecks, cases=skills.cases, vetoes=skills.vetoes,
                   methods=skills.methods, example_roots=dict(getattr(skills, "example_roots", {}) or {}))

    def fields(self) -> list[KBField]:
        return list(self._fields)

    def predicates(self) -> list[Predicate]:
        return list(self._predicates)

    def tiers(self) -> list[Tier]:
        return list(self._tiers)

    def bottlenecks(self) -> list[Bottleneck]:
        return list(self._bottlenecks)

    def vetoes(self) -> list[Veto]:
        return list(self._vetoes)

    def cases_for(self, bottleneck: str | None, tier: str | None, structure: int | None, *,
                  fallback: bool = False) -> list[Case]:
        """Same filter as the store's SQL: ``None`` tier/structure matches only cases that list none."""
        out = []
        for c in self._cases:
            if fallback:
                if not c.fallback or not (c.bottleneck is None or c.bottleneck == bottleneck):
                    continue
            elif c.fallback or c.bottleneck != bottleneck:
                continue
            if c.tiers and (tier is None or tier not in c.tiers):
                continue
            if c.structures and (structure is None or structure not in c.structures):
                continue
            out.append(c)
        return out

    def methods(self, ids: list[str] | None = None) -> list[Method]:
        if ids is None:
            return sorted(self._methods.values(), key=lambda m: m.id)
        return [self._methods[i] for i in ids if i in self._methods]

    def example_root(self, method_id: str) -> Path | None:
        return self._example_roots.get(method_id)

    def search_docs(self, text: str, k: int = 5, methods: list[str] | None = None, **_: Any) -> list[Any]:
        return []
