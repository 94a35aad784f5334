"""``kernelskill prompts render TASK``: the exact prompt the optimize loop would send at one step, running
nothing (no GPU, no LLM). The query does run, against the real KB, as the loop's would.

Steps: ``generate`` (the seed; the default without ``--candidate``), ``plan`` (the default with one: the
candidate is the parent being improved), ``write`` (the optimizer, given the method the planner chose:
``--method``, else the top permitted one, and a placeholder for the planner's plan) and ``diagnose`` (the
candidate failed as ``--result`` says, an EvalResult JSON; a placeholder failure without it). The text is
deterministic (no time, no path of this machine), so it can be kept as a golden file and diffed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import click

from kernelskill.commands._common import checked_precision, common_options, emit, precision_option
from kernelskill.config import LoopSettings
from kernelskill.errors import KernelskillError

STEPS = ("generate", "plan", "write", "diagnose")
FORMATS = get_args(LoopSettings.model_fields["candidate_format"].annotation)  # what `optimize --format` takes
#: stands where the loop puts the planner's answer, in a rendered writer prompt
PLAN_PLACEHOLDER = "<the planner's plan for this method>"
FAILURE_PLACEHOLDER = {"status": "runtime_error", "message": "<the harness's message>"}


def render_step(settings: Any, task: Path, *, step: str, candidate: Path | None = None,
                profile: Path | None = None, knowledge: str = "kb", candidate_format: str = "load_inline",
                method: str | None = None, result: dict[str, Any] | None = None,
                parent_speedup: float = 1.0, retriever: Any = None, plans: int = 1) -> dict[str, Any]:
    """``{step, role, messages, expects}`` of one loop step, built by the loop's own agents and views."""
    from kernelskill.pipeline.loop import KBRetriever, eval_view, query_view
    from kernelskill.pipeline.loop.agents import (
        DIAGNOSIS_SCHEMA,
        PLAN_SCHEMA,
        Agents,
        PlanDecision,
        code_expects,
        default_gpu,
        json_expects,
    )
    from kernelskill.pipeline.loop.memory import Memory
    from kernelskill.pipeline.loop.planning import plans_schema
    from kernelskill.taskfile import validate_task

    task_source = validate_task(task)
    if step not in STEPS:
        raise KernelskillError(f"--step {step!r}: one of {', '.join(STEPS)}")
    if step != "generate" and candidate is None:
        raise KernelskillError(f"--step {step}: give --candidate FILE (the kernel that step works on)")
    if candidate is not None and not candidate.is_file():
        raise KernelskillError(f"{candidate}: candidate file not found")
    # what ``optimize`` gives the loop: the protocol's contract, in the precision the task runs in
    gpu = default_gpu(settings.arch, protocol=settings.harness.protocol, precision=settings.harness.precision)
    agents = Agents(None, gpu, candidate_format=candidate_format, knowledge=knowledge)
    memory = Memory().view()
    kernel_source = candidate.read_text() if candidate is not None else ""
    if step == "generate":  # the KB arm's seed carries the KB's advice for the task's operations
        advice = ((retriever or KBRetriever(settings)).task_advice(task, protocol=settings.harness.protocol)
                  .model_dump(mode="json") if knowledge == "kb" else None)
        messages = agents.generate_messages(task_source=task_source, memory=memory, advice=advice)
        return {"step": step, "role": "generator", "messages": messages, "expects": code_expects(candidate_format)}
    if step == "diagnose":
        failure = eval_view(result or FAILURE_PLACEHOLDER)
        if failure["harness_failure"]:
            raise KernelskillError(f"--result: {failure['status']} in the harness's own {failure['stage']} stage is "
                                   "the harness's failure; the loop reports it and sends no diagnosis")
        messages = agents.diagnose_messages(task_source=task_source, kernel_source=kernel_source, failure=failure,
                                            memory=memory)
        return {"step": step, "role": "diagnoser", "messages": messages, "expects": json_expects(DIAGNOSIS_SCHEMA)}

    if knowledge == "none":
        query: dict[str, Any] = {}
        permitted: list[dict[str, Any]] = []
    elif knowledge == "profile":  # the third arm: the parent's measured counters, no KB content
        numbers = (retriever or KBRetriever(settings)).profile_numbers(profile) if profile is not None else None
        query = {"profile_numbers": numbers, "profile_error": None if numbers else "no profile was given"}
        permitted = []
    else:
        assert candidate is not None
        raw = (retriever or KBRetriever(settings)).query(candidate, task=task, profile=profile)
        query = query_view(raw) | {"error": None}
        permitted = query["permitted"]
    if step == "plan":
        messages = agents.plan_messages(task_source=task_source, kernel_source=kernel_source,
                                        parent_speedup=parent_speedup, query=query, permitted=permitted,
                                        filtered={}, memory=memory, plans_wanted=plans)
        ids = None if knowledge in ("none", "profile") else [m["id"] for m in permitted]
        if plans > 1:  # a search round's ask: several plans in one answer
            expects = json_expects(plans_schema(), ids) | {"plans_wanted": plans}
        else:
            expects = json_expects(PLAN_SCHEMA, ids)
        return {"step": step, "role": "planner", "messages": messages, "expects": expects}

    chosen: dict[str, Any]
    if knowledge in ("none", "profile"):
        chosen = {"id": method or "<the planner's technique>", "name": "", "guidance": ""}
    elif not permitted:
        raise KernelskillError(f"{candidate}: the query permits no method, so the loop would stop before writing")
    else:
        chosen = next((m for m in permitted if m["id"] == method), permitted[0]) if method else permitted[0]
        if method and chosen["id"] != method:
            raise KernelskillError(f"--method {method}: not permitted here; one of "
                                   f"{', '.join(m['id'] for m in permitted)}")
    plan = PlanDecision(method=chosen["id"], plan=PLAN_PLACEHOLDER)
    messages = agents.optimize_messages(task_source=task_source, kernel_source=kernel_source, method=chosen,
                                        plan=plan, memory=memory)
    return {"step": step, "role": "optimizer", "messages": messages, "expects": code_expects(candidate_format)}


def as_text(rendered: dict[str, Any]) -> str:
    """The messages as one plain text, each under a ``===== role =====`` line."""
    parts = [f"===== {m['role']} ({rendered['role']}, step {rendered['step']}) =====\n{m['content'].rstrip()}\n"
             if m["role"] == "system" else f"===== {m['role']} =====\n{m['content'].rstrip()}\n"
             for m in rendered["messages"]]
    return "\n".join(parts)


@click.group("prompts")
def prompts() -> None:
    """The prompts the optimize loop sends."""


@prompts.command("render")
@click.argument("task", type=click.Path(path_type=Path))
@click.option("--candidate", type=click.Path(path_type=Path), default=None,
              help="The kernel the step works on: the parent (plan, write) or the failed candidate (diagnose).")
@click.option("--profile", type=click.Path(path_type=Path), default=None,
              help="The candidate's ncu profile (CSV), as the loop's profile step would give it to the query.")
@click.option("--step", type=click.Choice(STEPS), default=None,
              help="Which prompt (default: plan with --candidate, generate without).")
@click.option("--knowledge", type=click.Choice(["kb", "none", "profile"]), default="kb", show_default=True,
              help="none: the ablation arm's planner (no query, no retrieved knowledge); profile: the third arm's "
                   "(the --profile counters, no retrieved knowledge).")
@click.option("--format", "candidate_format", type=click.Choice(FORMATS), default="load_inline",
              show_default=True, help="The candidate format the code-writing roles are asked for.")
@click.option("--method", default=None, help="write: the method the planner chose (default: the top permitted).")
@click.option("--result", "result_path", type=click.Path(path_type=Path), default=None,
              help="diagnose: the harness's EvalResult JSON for the candidate (default: a placeholder failure).")
@click.option("--speedup", "parent_speedup", type=float, default=1.0, show_default=True,
              help="plan: the parent's measured speedup over eager.")
@click.option("--plans", type=click.IntRange(1, 64), default=1, show_default=True,
              help="plan: how many plans one answer gives (a search round's share of a frontier member).")
@precision_option
@common_options
def render(ctx: Any, task: Path, candidate: Path | None, profile: Path | None, step: str | None, knowledge: str,
           candidate_format: str, method: str | None, result_path: Path | None, parent_speedup: float,
           plans: int = 1, precision: str | None = None) -> None:
    """Print the exact prompt the loop would send at STEP for TASK, running nothing."""
    precision = checked_precision(precision)
    result = None
    if result_path is not None:
        try:
            result = json.loads(result_path.read_text())
        except (OSError, ValueError) as exc:
            raise KernelskillError(f"{result_path}: not an EvalResult JSON: {exc}") from exc
    if profile is not None and not profile.is_file():
        raise KernelskillError(f"{profile}: profile file not found")
    rendered = render_step(ctx.settings().under_precision(precision), task, step=step or ("plan" if candidate else "generate"),
                           candidate=candidate, profile=profile, knowledge=knowledge,
                           candidate_format=candidate_format, method=method, result=result,
                           parent_speedup=parent_speedup, plans=plans)
    emit(ctx, rendered, lambda r: click.echo(as_text(r), nl=False))
