"""The result of feature extraction (the contract in docs/CONTRACTS.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EvidenceLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    line: int  # 1-based, in the original file
    text: str
    rule: str  # the fact or rule that matched (``llm`` for fallback answers)


class FeatureSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: dict[str, bool | int]
    evidence: dict[str, list[EvidenceLine]] = Field(default_factory=dict)
    decided: dict[str, bool] = Field(default_factory=dict)
    source_hash: str
    ruleset_version: str
    kernels: list[str] = Field(default_factory=list)
    launches: list[str] = Field(default_factory=list)
    llm_model: str | None = None

    def undecided(self) -> list[str]:
        return [name for name, ok in self.decided.items() if not ok]
