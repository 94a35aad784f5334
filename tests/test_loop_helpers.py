"""Stand-ins at the true boundaries of the loop tests, and the scripted LLM side.

- ``ScriptedEvaluator``: the GPU side (there is no GPU here). A candidate's result is written in the
  candidate itself as a comment, ``# harness: status=mismatch`` or ``# harness: speedup=1.8``; every
  evaluate/profile it executes is appended to the file named by ``KS_TEST_EVAL_LOG`` so a test can
  count executions across processes.
- ``StandInRetriever``: used ONLY when the real ``kernelskill.query`` is not importable yet (the retrieval
  room is built in parallel); it returns a fixed permitted list in QueryResult's shape.
- ``LLMScript``: answers by step id; the planner answers pick a method by its position in the
  permitted list the prompt shows, so the script works with the real retriever too.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.rand(1024, 1024)]


def get_init_inputs():
    return []
'''


#: a tiny add task, and a correct pure-PyTorch candidate for it (the harness's CPU mode runs both)
ADD_TASK = '''import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.rand(64, 256), torch.rand(64, 256)]


def get_init_inputs():
    return []
'''
ADD_CANDIDATE = ("import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n"
                 "        return torch.sub(a, torch.neg(b))\n")


def kernel(marker: str, tag: str = "") -> str:
    """A ModelNew file whose harness result (for the stand-in evaluator) is ``marker``."""
    return f'''# harness: {marker}
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = """
__global__ void relu2_{tag or "k"}(const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f) * 2.f;
}}
"""


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0  # {tag}
'''


def fenced(code: str, lang: str = "python") -> str:
    return f"Here is the kernel.\n\n```{lang}\n{code}```\n"


class ScriptedEvaluator:
    def __init__(self) -> None:
        self.log_path = Path(os.environ["KS_TEST_EVAL_LOG"]) if os.environ.get("KS_TEST_EVAL_LOG") else None
        self.calls: list[tuple[str, str]] = []

    def _record(self, kind: str, candidate: Path) -> None:
        self.calls.append((kind, candidate.name))
        if self.log_path is not None:
            with self.log_path.open("a") as fh:
                fh.write(json.dumps({"kind": kind, "candidate": candidate.name}) + "\n")

    def check(self) -> None:
        return None

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        self._record("evaluate", candidate)
        marker = re.search(r"# harness: (\S+)=(\S+)", candidate.read_text())
        assert marker is not None, f"{candidate} has no harness marker"
        key, value = marker.groups()
        if key == "status":
            return {"status": value, "correct": False, "message": f"scripted {value}",
                    "build_log": "error: identifier \"blockIdx_x\" is undefined" if value == "compile_error" else ""}
        speed = float(value)
        return {"status": "ok", "correct": True, "speedup": speed, "baseline_ms": 3.0,
                "candidate_ms": round(3.0 / speed, 4), "candidate_iqr_ms": 0.01, "baseline_iqr_ms": 0.01,
                "message": "", "build_log": "", "details": {"seed": seed}}

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        self._record("profile", candidate)
        return {"ok": False, "message": "scripted: no ncu on this machine", "csv": ""}


PERMITTED = ["coalesced_access", "vectorized_access_16b", "kernel_fusion", "more_work_per_thread"]


class StandInRetriever:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.protocols: list[str | None] = []
        self.precisions: list[str | None] = []

    def query(self, kernel: Path, *, task: Path, profile: Path | None, protocol: str | None = None,
              precision: str | None = None
              ) -> dict[str, Any]:
        self.calls.append(kernel.name)
        self.protocols.append(protocol)
        self.precisions.append(precision)
        return {"static_only": profile is None, "tier": "unknown", "bottleneck": "memory_bandwidth",
                "case": {"id": "mem.streaming", "title": "streaming memory-bound kernel", "rationale": "no reuse"},
                "permitted": [{"id": m, "name": m.replace("_", " "), "rank": i + 1, "guidance": f"apply {m}"}
                              for i, m in enumerate(PERMITTED)],
                "forbidden": [{"id": "tensor_core_mma", "reason": "no matrix product"}], "profile": None}


    def profile_numbers(self, profile: Path) -> dict[str, Any]:
        """The real reading of a profile's counters (``retrieval.profile``: no KB involved)."""
        from kernelskill.pipeline.loop.adapters import profile_numbers

        self.calls.append(f"numbers:{profile.name}")
        return profile_numbers(profile)


def retriever() -> Any:
    """The stand-in retriever: these tests exercise the loop, not the query (which has its own tests; the
    real query inside the loop is covered by ``test_loop.py``'s KBRetriever test)."""
    return StandInRetriever()


def permitted_in(prompt: str) -> list[str]:
    section = prompt.split("## Permitted methods", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\d+\. `([a-z0-9_.\-]+)`", section, re.M)


def planner_answer(pick: int | str, plan: str = "vectorise the loads") -> Any:
    def answer(step: str, role: str, body: dict[str, Any]) -> str:
        ids = permitted_in(body["messages"][-1]["content"])
        method = ids[pick] if isinstance(pick, int) else pick
        return json.dumps({"method": method, "rationale": "the bottleneck says so", "plan": plan})

    return answer


DIAGNOSIS = json.dumps({"error_class": "compile_error", "root_cause": "blockIdx_x is not a CUDA builtin",
                        "fix": "use blockIdx.x"})


def review(accept: bool) -> str:
    return json.dumps({"accept": accept, "reason": "measured faster" if accept else "not faster"})


def main_script(slow_step: str | None = None, slow_s: float = 60.0, timeout_fault: bool = True
                ) -> dict[str, list[Any]]:
    """The whole trajectory of the CPU loop test (round by round), with faults on some steps.

    r00 seed: compile error; r01 repair (first answer has no code, re-asked) -> 1.10x, accepted;
    r02 plan names a method outside the list (re-asked) -> vectorized 1.90x, accepted;
    r03 plan twice outside the list -> fallback to the top permitted -> mismatch;
    r04 repair -> 1.50x: slower than 1.90x, so the measurements reject it (the reviewer is not asked);
    r05 from r02 again: the failed method is filtered; kernel_fusion -> 2.40x, accepted.
    """
    script: dict[str, list[Any]] = {
        "r00.generate.1": [fenced(kernel("status=compile_error", "seed"), lang="")],
        "r01.diagnose.1": [DIAGNOSIS],
        "r01.repair.1": ["I fixed blockIdx_x; the kernel is now correct."],
        "r01.repair.2": [fenced(kernel("speedup=1.10", "fixed"))],
        "r02.plan.1": [{"status": 429, "retry_after": 0}, planner_answer("tensor_core_mma")],
        "r02.plan.2": [planner_answer(1, "float4 loads and stores")],
        "r02.optimize.1": [{"status": 500}, fenced(kernel("speedup=1.90", "vec"))],
        "r02.review.1": [review(True)],
        "r03.plan.1": [planner_answer("cuda_graphs")],
        "r03.plan.2": ["I would rather not choose."],
        "r03.optimize.1": [fenced(kernel("status=mismatch", "coal"))],
        "r04.diagnose.1": [json.dumps({"error_class": "mismatch", "root_cause": "wrong index", "fix": "use i"})],
        "r04.repair.1": [fenced(kernel("speedup=1.50", "coalfix"))],
        "r05.plan.1": [planner_answer(1, "fuse relu and scale into one pass")],
        "r05.optimize.1": [{"delay": 1.2, "text": "too late"}, fenced(kernel("speedup=2.40", "fused"))],
        "r05.review.1": [review(True)],
    }
    if not timeout_fault:
        script["r05.optimize.1"] = script["r05.optimize.1"][1:]
    if slow_step:
        script[slow_step] = [{"delay": slow_s, "text": "never read"}] + script.get(slow_step, [])[-1:]
    return script
