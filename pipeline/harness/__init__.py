"""Compile, verify, time and profile candidate kernels in isolation.

This package imports torch and the standard library only, so it runs on a bare GPU box.
Entry points: :func:`evaluate`, :func:`build`, :func:`profile`, :class:`LocalEvaluator`.
"""

from __future__ import annotations

from .api import (
    EvalJob,
    Evaluator,
    LocalEvaluator,
    build,
    build_many,
    check_candidate,
    evaluate,
    run_candidate,
    seed_compile_baselines,
)
from .preflight import HarnessUnavailable
from .profiling import profile
from .results import STATUSES, BuildResult, EvalConfig, EvalResult, ProfileResult

__all__ = [
    "STATUSES", "BuildResult", "EvalConfig", "EvalJob", "EvalResult", "Evaluator", "HarnessUnavailable",
    "LocalEvaluator", "ProfileResult", "build", "build_many", "check_candidate", "evaluate", "profile", "run_candidate",
    "seed_compile_baselines",
]
