"""The 18 static code features: declarative rules with evidence, an LLM fallback, a cache.

``extract(source, path=None, llm=None, cache=None) -> FeatureSet`` (docs/CONTRACTS.md).
"""

from __future__ import annotations

from .engine import default_rules, load_rules
from .extract import extract, extract_file, kernel_features
from .fallback import FeatureCache
from .models import EvidenceLine, FeatureSet

__all__ = ["EvidenceLine", "FeatureCache", "FeatureSet", "default_rules", "extract", "extract_file", "kernel_features",
           "load_rules"]
