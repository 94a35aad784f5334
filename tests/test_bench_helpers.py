"""The scripted boundaries of the suite tests (no tests here).

- Task files in KernelBench's layout (``KernelBench/level<N>/<id>_<Name>.py``), written by the tests; each
  carries ``# suite-task: <name>`` so the LLM side can tell the runs apart (the prompts quote the task).
- :func:`responder`: the LLM's answers for the local OpenAI-compatible server, by task and role; the same
  request always gets the same answer, so a resumed suite walks the same path.
- :class:`CountingEvaluator`: the GPU boundary (there is no GPU here); a candidate's result is written in
  it (``# harness: speedup=1.8``); every evaluation is appended, with its run, to ``KS_TEST_EVAL_LOG``
  (counted across processes); ``KS_TEST_EVAL_SLEEP`` makes each evaluation take that long.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from tests.test_loop_helpers import DIAGNOSIS, StandInRetriever, fenced, kernel, planner_answer, review

__all__ = ["CountingEvaluator", "StandInRetriever", "responder", "task_source", "write_level"]


def task_source(name: str, scale: float = 2.0) -> str:
    return f'''# suite-task: {name}
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * {scale}


def get_inputs():
    return [torch.rand(256, 256)]


def get_init_inputs():
    return []
'''


def write_level(root: Path, level: int, names: list[str]) -> Path:
    """``root/KernelBench/level<N>/<i>_<name>.py`` for each name (1-based ids), as KernelBench lays them out."""
    folder = root / "KernelBench" / f"level{level}"
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names, start=1):
        (folder / f"{i}_{name}.py").write_text(task_source(f"L{level}_{name}", 1.0 + i))
    return folder


#: task name -> what its candidates measure: seed, then each optimize round ("status=..." or a speedup)
def outcome(task: str, round_: int, role: str) -> str:
    digest = sum(map(ord, task))
    if role == "repair":
        return "speedup=1.25"
    if round_ == 0:
        return "status=mismatch" if digest % 3 == 0 else f"speedup={1.0 + (digest % 5) / 10:.2f}"
    return f"speedup={1.2 + round_ * 0.3 + (digest % 7) / 10:.2f}" if digest % 4 else "status=compile_error"


def _task_of(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        match = re.search(r"# suite-task: (\S+)", str(message.get("content", "")))
        if match:
            return match.group(1)
    return "unknown"


def responder(step: str, role: str, body: dict[str, Any]) -> Any:
    task = _task_of(body)
    match = re.match(r"r(\d+)\.([a-z_]+)", step)
    round_, kind = (int(match.group(1)), match.group(2)) if match else (0, role)
    if kind in ("generate", "optimize", "repair"):
        return fenced(kernel(outcome(task, round_, kind), f"{kind}{round_}"))
    if kind == "plan":
        return planner_answer(0)(step, role, body)
    if kind == "diagnose":
        return DIAGNOSIS
    if kind == "review":
        return review(True)
    return "no answer scripted"


class CountingEvaluator:
    def __init__(self) -> None:
        self.log_path = Path(os.environ["KS_TEST_EVAL_LOG"]) if os.environ.get("KS_TEST_EVAL_LOG") else None
        self.sleep = float(os.environ.get("KS_TEST_EVAL_SLEEP") or 0)
        self.calls: list[tuple[str, str, str]] = []

    def _record(self, kind: str, candidate: Path, seed: int | None) -> None:
        key = (kind, candidate.parent.parent.name, f"{candidate.name}@{seed}")
        self.calls.append(key)
        if self.log_path is not None:
            with self.log_path.open("a") as fh:
                fh.write(json.dumps(list(key)) + "\n")
        if self.sleep:
            time.sleep(self.sleep)

    def check(self) -> None:
        return None

    def evaluate(self, task: Path, candidate: Path, *, seed: int | None = None) -> dict[str, Any]:
        self._record("evaluate", candidate, seed)
        key, value = re.search(r"# harness: (\S+)=(\S+)", candidate.read_text()).groups()  # type: ignore[union-attr]
        if key == "status":
            return {"status": value, "correct": False, "message": f"scripted {value}", "build_log": "",
                    "details": {"task_dtype": "fp32", "gpu_name": "scripted"}}
        speed = float(value)
        return {"status": "ok", "correct": True, "speedup": speed, "baseline_ms": 3.0, "candidate_ms": 3.0 / speed,
                "compile_ms": 2.4, "candidate_iqr_ms": 0.01, "baseline_iqr_ms": 0.01, "message": "", "build_log": "",
                "details": {"seed": seed, "task_dtype": "fp32", "gpu_name": "scripted",
                            "speedup_vs_compile": 2.4 / (3.0 / speed)}}

    def profile(self, task: Path, candidate: Path) -> dict[str, Any]:
        self._record("profile", candidate, None)
        return {"ok": False, "message": "scripted: no ncu here", "csv": ""}
