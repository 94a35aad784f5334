"""The optimize loop: the orchestrator (``loop``), the OpenAI-compatible client with retries and
accounting (``llm``), the agent roles as template + parser + validator (``agents``), the per-task
short-term memory (``memory``) and the seams to the GPU and the KB (``adapters``).
"""

from __future__ import annotations

from kernelskill.taskfile import validate_task

from .adapters import HarnessEvaluator, KBRetriever, eval_view, query_view
from .loop import Loop, LoopOptions, LoopResult, Paused

__all__ = ["HarnessEvaluator", "KBRetriever", "Loop", "LoopOptions", "LoopResult", "Paused", "eval_view",
           "query_view", "validate_task"]
