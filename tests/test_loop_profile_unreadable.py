"""A KB-arm run whose parent's profile does not read goes on from the code alone.

On an H100, ncu reported a cuBLAS GEMM's L2 throughput at 104.5 % of its sustained peak; the profile reader
refused it (then above its tolerance) and the query's error stopped two runs of an ablation for good. A
profile that does not read is a fact about that parent's profile, not a broken knowledge base: the query is
made without it, the planner is told no profile was available, and the event says why.

The real ``openai`` client talks to the local test server; the GPU is the scripted evaluator, whose profile is
a real H200 capture with one counter made impossible; the retriever reads it with the real profile reader.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from kernelskill.pipeline.loop import Loop
from kernelskill.pipeline.loop.llm import LLMClient
from kernelskill.retrieval.profile import load_profile
from tests.openai_test_server import ScriptedOpenAI
from tests.test_loop import llm_settings
from tests.test_loop_helpers import (
    ScriptedEvaluator,
    StandInRetriever,
    fenced,
    kernel,
    planner_answer,
    review,
)
from tests.test_loop_knowledge_none import arm_run

CAPTURE = Path(__file__).parent / "data" / "h200_profiles" / "l2_12.csv"
L2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"


def _impossible_capture() -> str:
    """The capture with its first kernel row's L2 throughput at 500 % (no counter reads that)."""
    rows = list(csv.reader(io.StringIO(CAPTURE.read_text())))
    col = rows[0].index(L2)
    rows[2][col] = "500"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue()


class BadProfileEvaluator(ScriptedEvaluator):
    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        self._record("profile", candidate)
        return {"ok": True, "message": "", "csv": _impossible_capture()}


class ReadingRetriever(StandInRetriever):
    """The stand-in query, after reading the profile with the real reader (which refuses it)."""

    def query(self, kernel: Path, *, task: Path, profile: Path | None, protocol: str | None = None,
              precision: str | None = None) -> dict[str, Any]:
        if profile is not None:
            load_profile(profile)
        return super().query(kernel, task=task, profile=profile, protocol=protocol, precision=precision)


SCRIPT = {
    "r00.generate.1": [fenced(kernel("speedup=1.10", "seed"))],
    "r01.plan.1": [planner_answer(1)],
    "r01.optimize.1": [fenced(kernel("speedup=1.40", "vectorised"))],
    "r01.review.1": [review(True)],
}


def test_an_unreadable_profile_leaves_the_query_to_the_code(tmp_path: Path) -> None:
    run, options = arm_run(tmp_path, "kb", rounds=1)
    with ScriptedOpenAI(SCRIPT) as server:
        result = Loop(run, LLMClient.from_settings(llm_settings(server.base_url)), BadProfileEvaluator(),
                      ReadingRetriever(), options).execute()
    assert result.status == "finished", result
    query = run.log.find("query.r00.generate", "query")["data"]
    assert query["error"].startswith("profile not used: ") and "above 100 %" in query["error"]
    assert L2 in query["error"]  # the one-line reason names the counter
    text = next(e for e in run.log.of_type("llm_call") if e["step"] == "r01.plan.1")["data"]["messages"][-1]["content"]
    assert "No profile was available" in text
